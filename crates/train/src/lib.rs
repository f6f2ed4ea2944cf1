//! The `train` package: thin command-line binaries (training, evaluation, explanation)
//! over the `dml-*` libraries, with run directories holding the resolved configuration,
//! metrics and atomic checkpoints.
//!
//! The binaries arrive with the training issue; until then the package only reserves its
//! place in the workspace.
