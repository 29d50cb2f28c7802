// Package catalog finds the notifier for a name: the built-ins, in-process, and plugins, each a
// binary in the plugin directory pinned by SHA-256 and run as a go-plugin process over gRPC.
//
// A plugin's process is started on its first use, given the entry's settings (Configure), and
// started again when it has died: a delivery attempt that the crash interrupted fails as
// retryable, so the pipeline's retry sends it to the new process. A binary whose SHA-256 is not
// the pinned one is refused, when the catalog is built and by go-plugin's SecureConfig at every
// start; plugins speak gRPC only, over automatic mutual TLS, and inherit none of the host's
// environment.
package catalog

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/veritrail/veritrail/plugins/sdk"
	"github.com/veritrail/veritrail/plugins/sdk/proto"
)

// The failure reasons of plugins that can never serve a delivery as they are.
const (
	// ReasonChecksum: the binary does not match its pin.
	ReasonChecksum = "checksum"
	// ReasonProtocol: the binary was built against plugin protocol versions this server does not
	// serve (plugins/README.md, "The SDK module and what it promises").
	ReasonProtocol = "protocol_version"
)

// Entry is a plugin in the operator's configuration.
type Entry struct {
	// Name is what PLUGIN targets name (sdk.Target.Plugin): lower-case letters, digits, - and _.
	Name string `json:"name" yaml:"name"`
	// Command is the binary's path relative to the plugin directory; it must stay inside it,
	// symbolic links included.
	Command string `json:"command" yaml:"command"`
	// SHA256 is the hex SHA-256 of the binary (sha256sum's first column).
	SHA256 string `json:"sha256" yaml:"sha256"`
	// Args are passed to the binary.
	Args []string `json:"args,omitempty" yaml:"args,omitempty"`
	// Settings are given to the plugin's Configure at every start.
	Settings map[string]string `json:"settings,omitempty" yaml:"settings,omitempty"`
}

// Config configures a catalog.
type Config struct {
	// Dir is the plugin directory; every plugin binary lives in it.
	Dir     string
	Plugins []Entry
	// StartTimeout bounds a plugin's start and handshake; default 30s.
	StartTimeout time.Duration
	// Logger receives go-plugin's logs and the plugins' stderr; default: warnings and above
	// through slog's default logger (SlogLogger).
	Logger hclog.Logger
	// Restarted, when set, is called with a plugin's name each time its process is started
	// again after the previous one exited (for the restarts metric).
	Restarted func(name string)
}

// Catalog is safe for concurrent use.
type Catalog struct {
	builtins map[string]sdk.Notifier
	plugins  map[string]*process
}

var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// New checks every entry (name, confinement to Dir, executable, checksum) and returns the
// catalog of builtins and plugins; no plugin process starts yet. builtins are used as given:
// the caller configures them.
func New(cfg Config, builtins map[string]sdk.Notifier) (*Catalog, error) {
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = SlogLogger(slog.Default(), hclog.Warn) // the process's format, never a second one
	}
	c := &Catalog{builtins: builtins, plugins: map[string]*process{}}
	var errs []error
	var dir string
	if len(cfg.Plugins) > 0 {
		var err error
		if dir, err = realDir(cfg.Dir); err != nil {
			return nil, err
		}
	}
	for _, e := range cfg.Plugins {
		p, err := newProcess(e, dir, cfg)
		switch {
		case err != nil:
			errs = append(errs, err)
		case builtins[e.Name] != nil:
			errs = append(errs, fmt.Errorf("plugin %q: a built-in notifier has that name", e.Name))
		case c.plugins[e.Name] != nil:
			errs = append(errs, fmt.Errorf("plugin %q: configured twice", e.Name))
		default:
			c.plugins[e.Name] = p
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	return c, nil
}

func realDir(dir string) (string, error) {
	if dir == "" {
		return "", errors.New("catalog: plugins are configured but no plugin directory is")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("catalog: plugin directory: %w", err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("catalog: plugin directory: %w", err)
	}
	return real, nil
}

// Lookup returns the notifier of that name.
func (c *Catalog) Lookup(name string) (sdk.Notifier, error) {
	if n, ok := c.builtins[name]; ok {
		return n, nil
	}
	if p, ok := c.plugins[name]; ok {
		return p, nil
	}
	return nil, fmt.Errorf("catalog: no notifier named %q", name)
}

// Status is a notifier's state, for operators and readiness checks.
type Status struct {
	Name    string
	Builtin bool
	// Running, PID and Starts describe a plugin's process; Starts counts every start, so
	// Starts-1 is the number of restarts.
	Running bool
	PID     int
	Starts  int
}

// Status lists every notifier, by name.
func (c *Catalog) Status() []Status {
	var out []Status
	for name := range c.builtins {
		out = append(out, Status{Name: name, Builtin: true, Running: true})
	}
	for _, p := range c.plugins {
		out = append(out, p.status())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Close stops every plugin process and waits for them to end. Notifiers of a closed catalog
// fail permanently.
func (c *Catalog) Close() error {
	var wg sync.WaitGroup
	for _, p := range c.plugins {
		wg.Go(p.close)
	}
	wg.Wait()
	return nil
}

// process is a plugin entry and its running process, if any.
type process struct {
	entry        Entry
	path         string
	sum          []byte
	startTimeout time.Duration
	logger       hclog.Logger
	restarted    func(name string)

	mu       sync.Mutex
	client   *plugin.Client
	cmd      *exec.Cmd
	notifier sdk.Notifier
	starts   int
	closed   bool
}

var _ sdk.Notifier = (*process)(nil)

func newProcess(e Entry, dir string, cfg Config) (*process, error) {
	if !namePattern.MatchString(e.Name) {
		return nil, fmt.Errorf("plugin %q: the name must be lower-case letters, digits, - and _", e.Name)
	}
	sum, err := hex.DecodeString(e.SHA256)
	if err != nil || len(sum) != sha256.Size {
		return nil, fmt.Errorf("plugin %q: sha256 %q is not 64 hexadecimal digits", e.Name, e.SHA256)
	}
	path, err := confine(dir, e.Command)
	if err != nil {
		return nil, fmt.Errorf("plugin %q: %w", e.Name, err)
	}
	if err := checkSum(path, sum); err != nil {
		return nil, fmt.Errorf("plugin %q: %w", e.Name, err)
	}
	return &process{entry: e, path: path, sum: sum, startTimeout: cfg.StartTimeout, logger: cfg.Logger.Named(e.Name),
		restarted: cfg.Restarted}, nil
}

// confine resolves command inside dir (already absolute and free of symbolic links) and
// returns the real path of an executable regular file there.
func confine(dir, command string) (string, error) {
	if command == "" {
		return "", errors.New("no command")
	}
	if filepath.IsAbs(command) {
		return "", fmt.Errorf("command %q must be relative to the plugin directory %s", command, dir)
	}
	real, err := filepath.EvalSymlinks(filepath.Join(dir, command))
	if err != nil {
		return "", fmt.Errorf("command %q: %w", command, err)
	}
	rel, err := filepath.Rel(dir, real)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("command %q resolves to %s, outside the plugin directory %s", command, real, dir)
	}
	info, err := os.Stat(real)
	if err != nil {
		return "", fmt.Errorf("command %q: %w", command, err)
	}
	if !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("command %q (%s) is not an executable file", command, real)
	}
	return real, nil
}

// checkSum compares the file's SHA-256 with the pin and names both when they differ.
func checkSum(path string, want []byte) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("checksum: %w", err)
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Errorf("checksum of %s: %w", path, err)
	}
	if got := h.Sum(nil); !bytes.Equal(got, want) {
		return fmt.Errorf("refusing to run %s: its sha256 is %x but the configuration pins %x", path, got, want)
	}
	return nil
}

// Configure replaces the entry's settings and applies them: to the running process, or by
// starting one, so bad settings are reported now rather than at the first delivery. Later
// starts use them too; on error the previous settings stay.
func (p *process) Configure(ctx context.Context, settings map[string]string) error {
	p.mu.Lock()
	previous, running := p.entry.Settings, p.notifier
	p.entry.Settings = settings
	p.mu.Unlock()
	var err error
	if running != nil {
		err = running.Configure(ctx, settings)
	} else {
		_, _, err = p.live(ctx)
	}
	if err != nil {
		p.mu.Lock()
		p.entry.Settings = previous
		p.mu.Unlock()
		return fmt.Errorf("plugin %q: configure: %w", p.entry.Name, err)
	}
	return nil
}

// Notify sends through the plugin process, starting it first if it is not running.
func (p *process) Notify(ctx context.Context, n *sdk.Notification) error {
	if err := ctx.Err(); err != nil {
		// No process is started for an attempt that is already over.
		f := sdk.Classify(fmt.Errorf("plugin %q: %w", p.entry.Name, err))
		return &f
	}
	client, notifier, err := p.live(ctx)
	if err != nil {
		return err
	}
	err = notifier.Notify(ctx, n)
	if err == nil {
		return nil
	}
	// A failure the plugin classified comes back as data; a failed call carries a gRPC status.
	// A broken connection (Unavailable, or Canceled while our context is not) or an exited
	// process means the process is gone or unusable: it is dropped, and the next attempt
	// starts a new one. Nothing here reads error texts.
	st, isCall := status.FromError(err)
	if isCall && (client.Exited() || (ctx.Err() == nil && (st.Code() == codes.Unavailable || st.Code() == codes.Canceled))) {
		p.discard(client)
		return sdk.Retryable(sdk.ReasonPluginFailure, fmt.Errorf("plugin %q: the process ended or hung up during the attempt: %w", p.entry.Name, err))
	}
	return err
}

// live returns the running process's client and notifier, starting the process when there is
// none or it has exited.
func (p *process) live(ctx context.Context) (*plugin.Client, sdk.Notifier, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, nil, sdk.Permanent(sdk.ReasonConfig, fmt.Errorf("plugin %q: the catalog is closed", p.entry.Name))
	}
	if p.client != nil && !p.client.Exited() {
		return p.client, p.notifier, nil
	}
	if p.client != nil {
		p.logger.Warn("plugin process exited; restarting it", "starts", p.starts)
		if p.restarted != nil {
			p.restarted(p.entry.Name)
		}
		p.client.Kill()
		p.client, p.cmd, p.notifier = nil, nil, nil
	}

	cmd := exec.Command(p.path, p.entry.Args...)
	cmd.Dir = filepath.Dir(p.path)
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  proto.Handshake,
		VersionedPlugins: proto.PluginSets(nil),
		Cmd:              cmd,
		SecureConfig:     &plugin.SecureConfig{Checksum: p.sum, Hash: sha256.New()},
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		SkipHostEnv:      true,
		StartTimeout:     p.startTimeout,
		Logger:           p.logger,
	})
	notifier, err := p.connect(ctx, client)
	if err != nil {
		client.Kill()
		return nil, nil, err
	}
	p.client, p.cmd, p.notifier = client, cmd, notifier
	p.starts++
	return client, notifier, nil
}

// connect starts the process, dispenses the notifier and configures it.
func (p *process) connect(ctx context.Context, client *plugin.Client) (sdk.Notifier, error) {
	rpc, err := client.Client()
	if errors.Is(err, plugin.ErrChecksumsDoNotMatch) {
		// Name both sums: the operator has to know which binary is there.
		detail := checkSum(p.path, p.sum)
		if detail == nil {
			detail = err
		}
		return nil, sdk.Permanent(ReasonChecksum, fmt.Errorf("plugin %q: %w", p.entry.Name, detail))
	}
	if err != nil && strings.Contains(err.Error(), "incompatible API version") {
		// No protocol version in common (go-plugin has no error value for it; its message is
		// pinned by TestPluginOfAnotherProtocolVersionIsRefused): a retry meets the same binary.
		return nil, sdk.Permanent(ReasonProtocol, fmt.Errorf("plugin %q: %s speaks no protocol version this server serves (%v): %w",
			p.entry.Name, p.path, slices.Sorted(maps.Keys(proto.PluginSets(nil))), err))
	}
	if err != nil {
		return nil, sdk.Retryable(sdk.ReasonPluginFailure, fmt.Errorf("plugin %q: start %s: %w", p.entry.Name, p.path, err))
	}
	raw, err := rpc.Dispense(proto.PluginName)
	if err != nil {
		return nil, sdk.Permanent(sdk.ReasonConfig, fmt.Errorf("plugin %q: dispense %s: %w", p.entry.Name, proto.PluginName, err))
	}
	nc, ok := raw.(proto.NotifierClient)
	if !ok {
		return nil, sdk.Permanent(sdk.ReasonConfig, fmt.Errorf("plugin %q: dispensed %T, not a notifier", p.entry.Name, raw))
	}
	notifier := sdk.NewClient(nc)
	if err := notifier.Configure(ctx, p.entry.Settings); err != nil {
		if ctx.Err() != nil {
			// Not the settings' fault: the attempt ended while the plugin was starting.
			f := sdk.Classify(fmt.Errorf("plugin %q: configure: %w", p.entry.Name, ctx.Err()))
			return nil, &f
		}
		return nil, sdk.Permanent(sdk.ReasonConfig, fmt.Errorf("plugin %q: configure: %w", p.entry.Name, err))
	}
	return notifier, nil
}

// discard drops client if it is still the current one, so the next attempt starts anew.
func (p *process) discard(client *plugin.Client) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.client == client {
		p.client.Kill()
		p.client, p.cmd, p.notifier = nil, nil, nil
	}
}

func (p *process) status() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Status{Name: p.entry.Name, Starts: p.starts}
	if p.client != nil && !p.client.Exited() {
		s.Running = true
		if p.cmd != nil && p.cmd.Process != nil {
			s.PID = p.cmd.Process.Pid
		}
	}
	return s
}

func (p *process) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.client != nil {
		p.client.Kill()
		p.client, p.cmd, p.notifier = nil, nil, nil
	}
}
