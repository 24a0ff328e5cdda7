"""pgmem: long-term memory for LLM agents, inside PostgreSQL."""
__version__ = "0.1.0"
