// api/chat
