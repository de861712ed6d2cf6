"""LLM adapters (SPEC 7.1), one module each: :mod:`.scripted` (offline, deterministic) and
:mod:`.openai_chat` (OpenAI-compatible chat-completions servers). Each module's ``turn(profile,
request)`` makes one model turn, with the types of :mod:`.base` (the adapter interface);
:data:`..llm.ADAPTERS` maps the profile's ``adapter`` to it."""
