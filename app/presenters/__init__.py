"""The glue between the engine, the storage and the views: the chat controller, model
and engine control, what the gauge and the model picker show, live statistics, which
answers can go on, a chat exported, chat folders, and a local server run as a child
process."""
