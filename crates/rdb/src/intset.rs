//! Decoder for the intset blob (legacy or current) found inside RDB values.
