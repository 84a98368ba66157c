"""MulProg: programs an LLM writes, one module call per line, and what runs them."""
