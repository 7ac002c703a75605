//! harn (library half of the binary): binds harn-core to real files, processes and the terminal.
