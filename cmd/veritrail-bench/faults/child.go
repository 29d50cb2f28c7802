package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"

	"github.com/veritrail/veritrail/cmd/veritrail/app"
	"github.com/veritrail/veritrail/cmd/veritrail/config"
	"github.com/veritrail/veritrail/internal/devkafka"
)

// childEnv carries a child's role and settings (JSON): a binary that finds it set runs
// RunChild instead of what it normally does.
const childEnv = "VERITRAIL_FAULTS_CHILD"

// readyPrefix starts the line a child prints on stdout once it serves; the rest is its address.
const readyPrefix = "veritrail-faults-ready "

// The roles a child process runs.
const (
	roleBroker   = "broker"   // internal/devkafka on a fixed port and data directory
	roleIngest   = "ingest"   // app.StartIngest
	roleEvaluate = "evaluate" // app.StartEvaluate
	roleServe    = "serve"    // app.StartEmbedded
)

// childSpec is what a child runs.
type childSpec struct {
	Role       string   `json:"role"`
	Addr       string   `json:"addr,omitempty"` // HTTP address (ingest, serve)
	Port       int      `json:"port,omitempty"` // broker
	DataDir    string   `json:"data_dir,omitempty"`
	Postgres   string   `json:"postgres,omitempty"`
	Brokers    []string `json:"brokers,omitempty"`
	Partitions int32    `json:"partitions,omitempty"`
	Org        string   `json:"org,omitempty"`
	Token      string   `json:"token,omitempty"`
	// Instance is the Kafka static member ID (evaluate), the same at every start.
	Instance string `json:"instance,omitempty"`
}

// Launcher returns a command that runs this harness's child role: a binary whose main (or
// TestMain) calls RunChild when IsChild reports true. The harness adds the role to its
// environment and owns its standard streams.
type Launcher func() *exec.Cmd

// SelfLauncher re-executes path (os.Args[0] in a test binary, os.Executable() in a command)
// with args.
func SelfLauncher(path string, args ...string) Launcher {
	return func() *exec.Cmd {
		cmd := exec.Command(path, args...)
		cmd.Env = os.Environ()
		return cmd
	}
}

// IsChild reports whether this process was started by the harness to run a role.
func IsChild() bool { return os.Getenv(childEnv) != "" }

// RunChild runs the role the harness gave this process until it is killed, and returns the
// exit code when it stops on its own: the harness counts that as a finding. Logs go to stderr.
func RunChild() int {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	var spec childSpec
	if err := json.Unmarshal([]byte(os.Getenv(childEnv)), &spec); err != nil {
		log.Error("faults child: bad "+childEnv, "err", err)
		return 2
	}
	// The harness holds our stdin open: its end means the harness is gone, and we go too.
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(3)
	}()
	if spec.Role == roleBroker {
		b, err := devkafka.Start(devkafka.Config{Port: spec.Port, DataDir: spec.DataDir, Partitions: int(spec.Partitions)})
		if err != nil {
			log.Error("faults child: broker", "err", err)
			return 1
		}
		fmt.Printf("%s%s\n", readyPrefix, b.Addrs()[0])
		select {} // until killed
	}
	start, ok := map[string]func(context.Context, app.Config) (*app.Running, error){
		roleIngest: app.StartIngest, roleEvaluate: app.StartEvaluate, roleServe: app.StartEmbedded,
	}[spec.Role]
	if !ok {
		log.Error("faults child: unknown role", "role", spec.Role)
		return 2
	}
	r, err := start(context.Background(), childConfig(spec, log))
	if err != nil {
		log.Error("faults child: start", "role", spec.Role, "err", err)
		return 1
	}
	fmt.Printf("%s%s\n", readyPrefix, r.Addr)
	err = r.Wait()
	log.Error("faults child: stopped on its own", "role", spec.Role, "err", err)
	return 1
}

// childConfig is the configuration `veritrail serve`, `ingest` or `evaluate` builds from its
// settings' defaults (cmd/veritrail/config), with the rate limits off: the harness measures the
// pipeline, and one key sends all of the load.
func childConfig(spec childSpec, log *slog.Logger) app.Config {
	s := config.Defaults()
	s.Addr, s.DataDir, s.Postgres = spec.Addr, spec.DataDir, spec.Postgres
	s.KafkaBrokers, s.KafkaPartitions, s.KafkaInstanceID = spec.Brokers, spec.Partitions, spec.Instance
	s.RateLimitKey, s.RateLimitOrg = 0, 0
	s.BootstrapOrg, s.BootstrapToken = spec.Org, spec.Token
	return s.App(log)
}
