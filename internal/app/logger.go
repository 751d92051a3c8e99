package app

import (
	"fmt"
	"io"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// NewServeLogger builds the logger of `hookproxy serve`: JSON lines (default) or the
// human console format, on stderr, with a level that a reload can change
// (Options.Level).
func NewServeLogger(format, level string) (*zap.Logger, zap.AtomicLevel, error) {
	lvl := zapcore.InfoLevel
	if level != "" {
		if err := lvl.UnmarshalText([]byte(level)); err != nil {
			return nil, zap.AtomicLevel{}, fmt.Errorf("log level %q: want debug | info | warn | error", level)
		}
	}
	var zc zap.Config
	switch format {
	case "", "json":
		zc = zap.NewProductionConfig()
	case "console":
		zc = zap.NewDevelopmentConfig()
	default:
		return nil, zap.AtomicLevel{}, fmt.Errorf("log format %q: want json | console", format)
	}
	atom := zap.NewAtomicLevelAt(lvl)
	zc.Level = atom
	zc.Sampling = nil // every decision-relevant line counts; the proxy logs little
	zc.OutputPaths, zc.ErrorOutputPaths = []string{"stderr"}, []string{"stderr"}
	logger, err := zc.Build()
	return logger, atom, err
}

// NewWriterLogger builds a logger that writes to w (stderr in every command that uses
// it): over stdio, stdout belongs to the protocol, and the demo's stdout to its
// instructions.
func NewWriterLogger(w io.Writer, format, level string) (*zap.Logger, error) {
	lvl := zapcore.InfoLevel
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: want debug | info | warn | error", level)
	}
	var enc zapcore.Encoder
	switch format {
	case "", "json":
		enc = zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	case "console":
		ec := zap.NewDevelopmentEncoderConfig()
		ec.EncodeTime = zapcore.TimeEncoderOfLayout(time.TimeOnly)
		enc = zapcore.NewConsoleEncoder(ec)
	default:
		return nil, fmt.Errorf("log format %q: want json | console", format)
	}
	return zap.New(zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(w)), lvl)), nil
}
