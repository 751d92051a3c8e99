package app

import (
	"fmt"
	"io"
	"os"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/term"

	"github.com/hookproxy/hookproxy/config"
)

// NewServeLogger builds the logger of `hookproxy serve` on stderr, with a level that a
// reload can change (Options.Level). format is auto (console lines when stderr is a
// terminal, JSON lines otherwise), json or console. Neither carries stack traces: an
// operator reads what failed, not where in the code.
func NewServeLogger(format, level string) (*zap.Logger, zap.AtomicLevel, error) {
	lvl, err := parseLevel(level)
	if err != nil {
		return nil, zap.AtomicLevel{}, err
	}
	enc, err := encoder(format, isTerminal(os.Stderr))
	if err != nil {
		return nil, zap.AtomicLevel{}, err
	}
	atom := zap.NewAtomicLevelAt(lvl)
	// Every decision-relevant line counts and the proxy logs little: no sampling.
	core := zapcore.NewCore(enc, zapcore.Lock(os.Stderr), atom)
	return zap.New(core, zap.ErrorOutput(zapcore.Lock(os.Stderr))), atom, nil
}

// NewWriterLogger builds a logger that writes to w (stderr in every command that uses
// it): over stdio, stdout belongs to the protocol, and the demo's stdout to its
// instructions. format is as for NewServeLogger; auto looks at w.
func NewWriterLogger(w io.Writer, format, level string) (*zap.Logger, error) {
	lvl, err := parseLevel(level)
	if err != nil {
		return nil, err
	}
	enc, err := encoder(format, isTerminal(w))
	if err != nil {
		return nil, err
	}
	return zap.New(zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(w)), lvl)), nil
}

func parseLevel(level string) (zapcore.Level, error) {
	lvl := zapcore.InfoLevel
	if level != "" {
		if err := lvl.UnmarshalText([]byte(level)); err != nil {
			return lvl, fmt.Errorf("log level %q: want debug | info | warn | error", level)
		}
	}
	return lvl, nil
}

// encoder is the line format: JSON with ISO 8601 times (ts), or the console format with
// local times for people at a terminal.
func encoder(format string, terminal bool) (zapcore.Encoder, error) {
	switch format {
	case "", config.LogAuto:
		if terminal {
			format = config.LogConsole
		} else {
			format = config.LogJSON
		}
	case config.LogJSON, config.LogConsole:
	default:
		return nil, fmt.Errorf("log format %q: want auto | json | console", format)
	}
	if format == config.LogJSON {
		ec := zap.NewProductionEncoderConfig()
		ec.EncodeTime = zapcore.ISO8601TimeEncoder
		return zapcore.NewJSONEncoder(ec), nil
	}
	ec := zap.NewDevelopmentEncoderConfig()
	ec.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
	ec.CallerKey, ec.StacktraceKey = "", ""
	return zapcore.NewConsoleEncoder(ec), nil
}

// isTerminal reports whether w is a terminal (a file whose descriptor is a tty).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
