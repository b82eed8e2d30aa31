"""The write side the model sees: the turn, the LangChain tool and its JSON schema, the
argument checks, and the vetting of a provider's tool call before it runs."""
