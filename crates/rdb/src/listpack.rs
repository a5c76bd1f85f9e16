//! Decoder for the listpack blob (legacy or current) found inside RDB values.
