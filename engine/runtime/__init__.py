"""The engine at run time: the service the app, the CLI and the server call, its thread,
a conversation with the loaded model and the chats kept between turns, what is
learned across chats (memory, the model's n-gram tables and the public answers' table
and index, calibration between requests), the replay of finished answers, and ranks
across machines."""
