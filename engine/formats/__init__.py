"""What an answer must look like and what is read out of it: JSON schemas and their
limits, grammars and their compile budget (constrained decoding), tool calls (the
model's own format and the generic one) and stop strings."""
