//! Decoder for the zipmap blob (legacy or current) found inside RDB values.
