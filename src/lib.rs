//! iopath: a Linux kernel I/O path profiler. The binary is a thin shell over this library.

pub mod cli;
pub mod doctor;
pub mod hist;
pub mod job;
pub mod loadgen;
pub mod probe;
pub mod report;
pub mod sysconf;
