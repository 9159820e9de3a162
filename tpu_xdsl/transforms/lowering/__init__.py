"""The pattern families of `lower-top-to-tpu`, one module each, and the context they share."""
