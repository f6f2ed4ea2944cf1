//! One module per subcommand: its arguments, the library call and what it prints.

pub mod analyze;
pub mod eval;
pub mod explain;
pub mod train;
