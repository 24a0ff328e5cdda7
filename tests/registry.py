"""Which test module runs which public functions as another tenant (tenant isolation).

tests/test_tenancy.py checks that every public function of schema pgmem is covered: by its own
per-function checks, or by one of these sets, each checked by the module named beside it (the
module also asserts that it called every function of its set). A new public function without
an isolation check fails test_tenancy.py::test_every_public_function_has_an_isolation_check;
add it to a check there, or to the set of the module that runs it here. The sets live here,
not in the modules, so that no test module imports another (tests/test_codebase.py).
"""
from __future__ import annotations

#: every public layered function: tests/test_layered_tenancy.py runs each as another tenant
LAYERED_FUNCTIONS = frozenset({
    "detect_facts", "set_fact", "end_fact", "profile", "fact_history", "apply_facts", "classify_intent", "cache_intent",
    "behaviour_decision", "resolve_policy", "observe_turn", "conversation_state", "resolve_thread", "set_thread_summary",
    "conversation_threads", "thread_messages", "extract_insights", "extract_concepts", "add_insight", "observe_reply",
    "search_insights", "research_context", "user_data_summary", "context_for"})

#: the web functions (sql/570_web.sql): tests/test_web_sql.py runs each as another tenant
WEB_FUNCTIONS = frozenset({"set_api_key", "has_api_key", "clear_api_key", "format_context", "memory_context",
                           "system_stats", "health", "list_bindings", "list_clusters", "list_jobs"})
WEB_SECDEF = ["set_api_key", "has_api_key", "clear_api_key", "_api_key"]

#: the integrations' functions (sql/128_integrations.sql): tests/test_integrations_tenancy.py runs each as another tenant
INTEGRATION_FUNCTIONS = frozenset({"list_memories", "put_item", "get_item", "delete_item", "search_items",
                                   "list_item_namespaces", "session_add_items", "session_get_items",
                                   "session_pop_item", "session_clear"})
INTEGRATION_SECDEF = ["session_add_items", "session_get_items", "session_pop_item", "session_clear"]

#: embedding moves (issue 26): tests/test_cli_reembed.py runs each as another tenant; with the
#: integrations' (tests/test_integrations_tenancy.py runs those)
ECO_FUNCTIONS = frozenset({"write_limits", "known_event_keys", "reembed", "claim_reembeddings", "complete_reembedding",
                           "finish_reembed", "cancel_reembed", "reembed_status"}) | INTEGRATION_FUNCTIONS
ECO_SECDEF = ["reembed", "claim_reembeddings", "complete_reembedding", "finish_reembed", "cancel_reembed",
              "reembed_status"] + INTEGRATION_SECDEF

#: issue 24's public functions, each run as another tenant with real logins:
#: tests/test_lifecycle.py::test_the_lifecycle_keeps_to_the_tenant,
#: tests/test_documents.py::test_documents_keep_to_their_tenant and
#: tests/test_design_rows.py::test_the_rows_keep_to_the_tenant. (vacuum_command and chunk_document
#: read no tenant's data: the catalog, and their argument.)
LIVING_FUNCTIONS = frozenset({
    "archive", "memory_activation", "delete_archived", "compact", "vacuum_command",
    "ingest_document", "chunk_document", "set_chunk_embeddings", "search_documents", "list_documents",
    "delete_document", "restore_document",
    "relevance_threshold", "retrieval_success_rate", "clear_memories", "restore_cleared", "clear_history",
    "restore_history"})
