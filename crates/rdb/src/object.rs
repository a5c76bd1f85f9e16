//! A value's type byte and payload as Valkey writes each encoding
//! (strings; lists as quicklist 2; sets intset / listpack / hashtable;
//! sorted sets listpack / skiplist; hashes listpack / hashtable).
