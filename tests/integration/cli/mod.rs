//! The CLI contract: output, exit codes, bad input, waiting. One file per
//! concern.

mod bad_input;
mod busy;
mod lifecycle;
mod output;
mod wrong_command;
