"""The engines the app speaks to besides the one ``app.__main__`` builds: a Draftless
server over HTTP (its stream and its checked reply) and the model-free replay of a
recorded answer. No MLX."""
