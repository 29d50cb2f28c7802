package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/veritrail/veritrail/cmd/veritrail-bench/scale"
	"github.com/veritrail/veritrail/cmd/veritrail/app"
	"github.com/veritrail/veritrail/internal/store/sqlstore"
)

// runScale fills a store of each size and times the reads that must not slow down as it grows.
func runScale(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg scale.Config
	sizes := fs.String("sizes", "10000,1000000", "store sizes measured, in attestations, ascending (a store each, read alternating)")
	fs.IntVar(&cfg.Environments, "environments", 1000, "environments in the store")
	fs.IntVar(&cfg.Requests, "requests", 300, "timed requests of each read at each size, one at a time")
	fs.StringVar(&cfg.Postgres, "postgres", "", "measure the distributed mode on a fresh schema of this PostgreSQL URL instead of the embedded one")
	fs.BoolVar(&cfg.KeepSchema, "keep-schema", false, "with --postgres: leave the filled schema in place (its name is printed), to look at query plans")
	fs.StringVar(&cfg.Dir, "dir", "", "where the embedded mode's stores go, a data directory per size, kept (default: a temporary one, removed)")
	fs.StringVar(&cfg.URL, "url", "", "measure the Veritrail running there once instead of filling and starting one (with --token, --trails)")
	fs.StringVar(&cfg.Token, "token", "", "with --url: an API key of the organization "+scale.Org)
	fs.IntVar(&cfg.Trails, "trails", 100_000, "with --url: the trails its store holds (fill: attestations / 10)")
	asJSON := fs.Bool("json", false, "print the result as JSON instead of a table")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("scale: unexpected arguments %v", fs.Args())
	}
	if (cfg.URL == "") != (cfg.Token == "") {
		return errors.New("scale: --url and --token go together")
	}
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("scale: --sizes: %w", err)
		}
		cfg.Sizes = append(cfg.Sizes, n)
	}
	cfg.Progress = stderr
	res, err := scale.Run(ctx, cfg)
	if err != nil {
		return err
	}
	return writeResult(stdout, res, *asJSON)
}

// runFill adds attestations, trails and environments to a store without the product running.
func runFill(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("fill", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sqlite := fs.String("sqlite", "", "the SQLite store to fill (serve's DATA_DIR/state.db)")
	pg := fs.String("postgres", "", "the PostgreSQL store to fill (a URL; its search_path names the schema)")
	org := fs.String("org", scale.Org, "the organization, created when missing")
	attestations := fs.Int("attestations", 1_000_000, "attestations to add, ten a trail")
	from := fs.Int("from-trail", 0, "index of the first trail to add: the trails a previous fill of this store made")
	envs := fs.Int("environments", 1000, "environments the store holds after the fill")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if (*sqlite == "") == (*pg == "") {
		return errors.New("fill: give one of --sqlite PATH or --postgres URL")
	}
	var st *sqlstore.Store
	var err error
	if *sqlite != "" {
		st, err = sqlstore.OpenSQLite(ctx, *sqlite)
	} else {
		st, err = sqlstore.OpenPostgres(ctx, *pg)
	}
	if err != nil {
		return err
	}
	defer st.Close()
	o, err := app.EnsureOrg(ctx, st, *org)
	if err != nil {
		return err
	}
	return scale.Fill(ctx, scale.FillConfig{Store: st, OrgID: o.ID, FromTrail: *from,
		ToTrail: *from + *attestations/scale.AttestationsPerTrail, Environments: *envs, Progress: stderr})
}
