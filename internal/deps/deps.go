//go:build tools

// Package deps pins the modules the project's packages are being built against, so that
// go.mod and go.sum stay complete while packages are added. Removed once every module is
// imported by real code.
package deps

import (
	_ "github.com/anthropics/anthropic-sdk-go"
	_ "github.com/fsnotify/fsnotify"
	_ "github.com/go-chi/chi/v5"
	_ "github.com/hashicorp/go-retryablehttp"
	_ "github.com/modelcontextprotocol/go-sdk/mcp"
	_ "github.com/openai/openai-go/v3"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/santhosh-tekuri/jsonschema/v6"
	_ "github.com/tidwall/gjson"
	_ "github.com/tidwall/sjson"
	_ "go.uber.org/goleak"
	_ "go.uber.org/zap"
	_ "go.yaml.in/yaml/v3"
	_ "go.opentelemetry.io/otel"
	_ "go.opentelemetry.io/otel/sdk/trace"
	_ "go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
)
