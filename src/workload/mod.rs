//! What workers do: the operations (`op`), which key each touches and in what order (`keys`),
//! how large objects are (`size`), and seeded payloads that can be verified without keeping
//! them (`payload`, `verify`).

pub mod keys;
pub mod op;
pub mod payload;
pub mod size;
pub mod verify;
