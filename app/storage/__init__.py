"""What the app keeps, reads and fetches, without Qt: chats in SQLite with their
provenance, folders and answer formats, the settings, server keys in the keychain,
attached files and PDFs, model downloads and the hub's search results, and where all
of it lives."""
