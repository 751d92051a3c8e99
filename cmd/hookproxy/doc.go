// Command hookproxy is a reverse proxy that enforces Agent Hooks Protocol hooks on LLM
// traffic. Its command line is cmd/hookproxy/cli; what each command runs is assembled by
// app.
package main
