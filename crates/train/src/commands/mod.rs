//! One module per subcommand: its arguments, the library call and what it prints.

pub mod analyze;
pub mod check;
pub mod embed;
pub mod eval;
pub mod explain;
pub mod export;
pub mod import;
pub mod train;
