//! The integration test binary: drives the hintcheck binary against harness scenarios and
//! real servers.

mod util;
