package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/veritrail/veritrail/cmd/veritrail/app"
	"github.com/veritrail/veritrail/ingest/auth"
	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/internal/store/sqlstore"
)

const adminUsage = `Usage: veritrail admin <subcommand> [flags] [args]

Subcommands (against --postgres when given, else the SQLite store in --data-dir):
  create-org NAME                       create an organization
  make-public ORG | make-private ORG    let anyone read ORG's flows, trails, artifacts, environments
                                        and snapshots without a key, or stop that
  create-user NAME [--display-name D]   create a user
  add-member USER ORG [--role R]        make USER a member of ORG (admin, member, snapshotter, reader)
  create-key --org ORG [--name N] [--role R] [--secret S]
                                        create a key of ORG's service account N (made with
                                        privilege R if missing) and print its secret
  create-key --user USER [--name N] [--secret S]
                                        create a personal API key; it works in each of USER's organizations
  seed FILE                             create the users, organizations, memberships, service
                                        accounts and keys a YAML file lists; running it again
                                        changes nothing (see docs/ARCHITECTURE.md for the format)
  wipe --yes-really                     delete everything in the store (test environments only)
  rejected-messages [ORG] [--state S] [--json]
                                        list the messages the evaluator could never apply (dead
                                        letters), newest first, of ORG or of every organization;
                                        --json prints one object per line with its payload
  replay ORG ID | replay ORG --all [--wait D]
                                        ask the evaluators to apply a rejected message of ORG
                                        again (or all of ORG's), once its cause is fixed, and
                                        wait up to D (default 10s) to print the outcomes
`

func runAdmin(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, adminUsage)
		return errors.New("no admin subcommand given")
	}
	sub := args[0]
	fs := flag.NewFlagSet("admin "+sub, flag.ContinueOnError)
	dataDir := fs.String("data-dir", env("data-dir", "./veritrail-data"), "data directory of the embedded mode")
	pg := fs.String("postgres", env("postgres", ""), "PostgreSQL DSN of the distributed mode")
	display := fs.String("display-name", "", "display name of the user (created_by)")
	role := fs.String("role", "admin", "role: admin, member, snapshotter or reader")
	org := fs.String("org", "", "organization of the key")
	user := fs.String("user", "", "user of a personal key")
	name := fs.String("name", "", "name of the key (shown as created_by for organization keys)")
	secret := fs.String("secret", "", "use this secret instead of a random one (e.g. from a secrets manager)")
	really := fs.Bool("yes-really", false, "confirm wipe")
	state := fs.String("state", "", "only rejected messages in this state: rejected, replay_requested or replayed")
	asJSON := fs.Bool("json", false, "print rejected messages as JSON, one per line, with their payloads")
	all := fs.Bool("all", false, "replay every rejected message of the organization")
	wait := fs.Duration("wait", 10*time.Second, "how long replay waits for the evaluators' outcomes")
	pos, err := parseInterleaved(fs, args[1:])
	if err != nil {
		return err
	}
	open := func() (store.Store, error) {
		if *pg != "" {
			return sqlstore.OpenPostgres(ctx, *pg)
		}
		if err := os.MkdirAll(*dataDir, 0o750); err != nil {
			return nil, err
		}
		return sqlstore.OpenSQLite(ctx, filepath.Join(*dataDir, "state.db"))
	}
	r := store.Role(*role)
	if !r.Valid() {
		return fmt.Errorf("--role must be one of %v, not %q", store.Roles(), *role)
	}
	var seed app.Seed
	switch {
	case sub == "wipe" && !*really:
		return errors.New("wipe deletes every organization, key and piece of evidence: refusing without --yes-really")
	case sub == "seed":
		if len(pos) != 1 {
			return errors.New("usage: veritrail admin seed FILE")
		}
		b, err := os.ReadFile(pos[0])
		if err != nil {
			return err
		}
		if seed, err = app.ParseSeed(b); err != nil { // before opening the store: a bad file changes nothing
			return err
		}
	}
	st, err := open()
	if err != nil {
		return err
	}
	defer st.Close()
	now := float64(time.Now().UnixMicro()) / 1e6
	switch sub {
	case "create-org":
		if len(pos) != 1 {
			return errors.New("usage: veritrail admin create-org NAME")
		}
		if _, err := st.OrgByName(ctx, pos[0]); err == nil {
			return fmt.Errorf("organization %q already exists", pos[0])
		}
		if _, err := app.EnsureOrg(ctx, st, pos[0]); err != nil {
			return err
		}
		fmt.Printf("created organization %s\n", pos[0])
	case "make-public", "make-private":
		if len(pos) != 1 {
			return fmt.Errorf("usage: veritrail admin %s ORG", sub)
		}
		o, err := st.OrgByName(ctx, pos[0])
		if err != nil {
			return fmt.Errorf("organization %q: %w", pos[0], err)
		}
		if err := st.SetOrgPublic(ctx, o.ID, sub == "make-public"); err != nil {
			return err
		}
		fmt.Printf("organization %s is now %s\n", pos[0], strings.TrimPrefix(sub, "make-"))
	case "seed":
		if err := app.ApplySeed(ctx, st, seed); err != nil {
			return err
		}
		fmt.Printf("seeded %d organizations and %d users from %s\n", len(seed.Organizations), len(seed.Users), pos[0])
	case "wipe":
		if err := st.Wipe(ctx); err != nil {
			return err
		}
		fmt.Println("the store is empty")
	case "rejected-messages":
		if len(pos) > 1 {
			return errors.New("usage: veritrail admin rejected-messages [ORG] [--state S] [--json]")
		}
		org := ""
		if len(pos) == 1 {
			org = pos[0]
		}
		return app.ListRejected(ctx, st, os.Stdout, org, store.ReplayState(*state), *asJSON)
	case "replay":
		switch {
		case len(pos) == 2 && !*all:
			return app.ReplayRejected(ctx, st, os.Stdout, pos[0], pos[1], *wait)
		case len(pos) == 1 && *all:
			return app.ReplayRejected(ctx, st, os.Stdout, pos[0], "", *wait)
		}
		return errors.New("usage: veritrail admin replay ORG ID, or veritrail admin replay ORG --all")
	case "create-user":
		if len(pos) != 1 {
			return errors.New("usage: veritrail admin create-user NAME [--display-name D]")
		}
		d := *display
		if d == "" {
			d = pos[0]
		}
		if err := st.CreateUser(ctx, store.User{ID: uuid.NewString(), Name: pos[0], DisplayName: d, CreatedAt: now}); err != nil {
			return err
		}
		fmt.Printf("created user %s\n", pos[0])
	case "add-member":
		if len(pos) != 2 {
			return errors.New("usage: veritrail admin add-member USER ORG [--role R]")
		}
		u, err := userByName(ctx, st, pos[0])
		if err != nil {
			return err
		}
		o, err := st.OrgByName(ctx, pos[1])
		if err != nil {
			return fmt.Errorf("organization %q: %w", pos[1], err)
		}
		if err := st.AddMember(ctx, u.ID, o.ID, r); err != nil {
			return err
		}
		fmt.Printf("%s is now %s of %s\n", pos[0], r, pos[1])
	case "create-key":
		s := *secret
		if s == "" {
			s = app.NewSecret()
		}
		switch {
		case *org != "" && *user == "":
			o, err := st.OrgByName(ctx, *org)
			if err != nil {
				return fmt.Errorf("organization %q: %w", *org, err)
			}
			n := *name
			if n == "" {
				n = "api-key"
			}
			if err := app.CreateOrgKey(ctx, st, o, n, r, s); err != nil {
				return err
			}
		case *user != "" && *org == "":
			u, err := userByName(ctx, st, *user)
			if err != nil {
				return err
			}
			if err := st.CreateKey(ctx, store.APIKey{ID: uuid.NewString(), Hash: auth.HashKey(s), UserID: u.ID, Name: u.DisplayName,
				Role: store.RoleReader}); err != nil {
				return err
			}
		default:
			return errors.New("create-key needs exactly one of --org or --user")
		}
		fmt.Println(s)
	default:
		fmt.Fprint(os.Stderr, adminUsage)
		return fmt.Errorf("unknown admin subcommand %q", sub)
	}
	return nil
}

func userByName(ctx context.Context, st store.Store, name string) (store.User, error) {
	u, err := st.UserByName(ctx, name)
	if err != nil {
		return u, fmt.Errorf("user %q: %w", name, err)
	}
	return u, nil
}

// parseInterleaved parses flags that may come before or after positional arguments
// ("create-org acme --data-dir d" as well as "create-org --data-dir d acme").
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}
