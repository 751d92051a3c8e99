// Package hookproxybin lets a test run the real hookproxy command line in a child
// process without building it: the test binary itself becomes the hookproxy binary.
// Path makes a link named "hookproxy" to the running test binary; TestMain calls
// RunIfInvoked first, which, when the process was started through such a link, runs the
// command line (cli.Main) instead of the tests and exits.
//
// The mode travels in argv[0], not in an environment variable, because a stdio backend
// gets a minimal environment (PATH and HOME only) and a hookproxy started by the tests
// may itself start hookproxy as such a backend.
//
// It imports neither the command line nor the app, so that the command line's own tests
// can use it: the caller passes cli.Main.
package hookproxybin
