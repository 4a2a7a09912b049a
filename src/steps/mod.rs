//! The layer of apply that acts on the cluster: the executor that runs a
//! plan's hops ([`exec`]), what each step does on a node ([`actions`]),
//! running a command on a node with a journal of everything run
//! ([`runner`], [`journal`]) and apply's lock against concurrent applies and
//! Kured reboots ([`lock`]).

mod actions;
pub mod dry_run;
pub mod exec;
pub mod journal;
pub mod lock;
pub mod runner;
