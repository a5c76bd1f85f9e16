//! Primitive encodings: lengths, strings (integer / LZF / raw), doubles,
//! and the listpack and intset blobs Valkey stores small collections in.
