//! Decoder for the ziplist blob (legacy or current) found inside RDB values.
