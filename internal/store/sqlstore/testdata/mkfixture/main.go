// Command mkfixture wrote the fixtures of TestUpgradeFixture: a store made by the schema of
// commit 085c4de (CREATE TABLE IF NOT EXISTS plus added columns, schema_version holding a
// digest, no migration versions), holding one organization, flow, trail, artifact and
// attestation. It was run once at that commit:
//
//	go run ./internal/store/sqlstore/testdata/mkfixture -sqlite internal/store/sqlstore/testdata/store-085c4de.db \
//	    -postgres 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable&search_path=veritrail_fixture'
//	pg_dump -h 127.0.0.1 -U postgres --schema=veritrail_fixture --inserts --no-owner --no-privileges test \
//	    > internal/store/sqlstore/testdata/store-085c4de.sql
//
// Run at a later commit it writes that commit's schema instead, which is not what the test
// upgrades from.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"

	"github.com/veritrail/veritrail/internal/store"
	"github.com/veritrail/veritrail/internal/store/sqlstore"
)

func main() {
	sqlitePath := flag.String("sqlite", "", "SQLite database file to create")
	pgDSN := flag.String("postgres", "", "PostgreSQL DSN whose (empty) search_path schema to fill")
	flag.Parse()
	ctx := context.Background()
	if *sqlitePath != "" {
		s, err := sqlstore.OpenSQLite(ctx, *sqlitePath)
		if err != nil {
			log.Fatal(err)
		}
		if err := fill(ctx, s); err != nil {
			log.Fatal(err)
		}
		if err := s.Close(); err != nil {
			log.Fatal(err)
		}
	}
	if *pgDSN != "" {
		s, err := sqlstore.OpenPostgres(ctx, *pgDSN)
		if err != nil {
			log.Fatal(err)
		}
		if err := fill(ctx, s); err != nil {
			log.Fatal(err)
		}
		if err := s.Close(); err != nil {
			log.Fatal(err)
		}
	}
}

func fill(ctx context.Context, s *sqlstore.Store) error {
	if err := s.CreateOrg(ctx, store.Org{ID: "org-fixture", Name: "acme", CreatedAt: 1700000000}); err != nil {
		return fmt.Errorf("org: %w", err)
	}
	return s.Update(ctx, func(tx store.Tx) error {
		if err := tx.PutTemplate(ctx, "tpl-1", "version: 1\ntrail:\n  artifacts:\n    - name: app\n"); err != nil {
			return err
		}
		if _, err := tx.UpsertFlow(ctx, store.Flow{ID: "flow-1", OrgID: "org-fixture", Name: "backend",
			Description: "the backend", Visibility: "private", TemplateID: "tpl-1", Tags: map[string]string{"team": "core"},
			CreatedAt: 1700000001, LastModifiedAt: 1700000001}); err != nil {
			return err
		}
		if _, err := tx.UpsertTrail(ctx, store.Trail{ID: "trail-1", OrgID: "org-fixture", FlowID: "flow-1", Name: "v1.0.0",
			TemplateID: "tpl-1", CreatedBy: "ci", CreatedAt: 1700000002, LastModifiedAt: 1700000002}); err != nil {
			return err
		}
		if err := tx.InsertArtifact(ctx, store.Artifact{ID: "art-1", OrgID: "org-fixture", FlowID: "flow-1",
			TrailID: "trail-1", Fingerprint: "a3f5c1e0b7d24c6e9f8a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6a", TemplateName: "app",
			Filename: "app.tar", GitCommit: "0123456789abcdef0123456789abcdef01234567", RepoName: "acme/backend",
			Report: json.RawMessage(`{"size":42}`), ReportedBy: "ci", CreatedAt: 1700000003}); err != nil {
			return err
		}
		return tx.InsertAttestation(ctx, store.Attestation{ID: "att-1", OrgID: "org-fixture", FlowID: "flow-1",
			TrailID: "trail-1", Name: "unit-tests", Type: "junit", IsCompliant: true,
			ArtifactFingerprint: "a3f5c1e0b7d24c6e9f8a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6a", TargetArtifact: "app",
			Data: json.RawMessage(`{"passed":12}`), ReportedBy: "ci", CreatedAt: 1700000004})
	})
}
