//! What workers do: seeded payloads that can be verified without keeping them (`payload`), and
//! which key each operation touches (`keys`).

pub mod keys;
pub mod payload;
pub mod verify;
