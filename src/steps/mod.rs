//! The layer of apply that acts on the cluster. Today: running a command on
//! a node with a journal of everything run ([`runner`], [`journal`]) and
//! apply's lock against concurrent applies and Kured reboots ([`lock`]).
//! The upgrade phases themselves build on these.

pub mod journal;
pub mod lock;
pub mod runner;
