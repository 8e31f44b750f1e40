//! Petrel's network impairment emulator: a seeded link model and a UDP relay.
