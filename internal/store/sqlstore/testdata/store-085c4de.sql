--
-- PostgreSQL database dump
--

\restrict M5ef76L69bNocd2V5ZMAGQz69Doqi9dOA09al8wzZfIEBDWzzTeabgcwTI6jYKv

-- Dumped from database version 15.20 (Debian 15.20-0+deb12u1)
-- Dumped by pg_dump version 15.20 (Debian 15.20-0+deb12u1)

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: veritrail_fixture; Type: SCHEMA; Schema: -; Owner: -
--

CREATE SCHEMA veritrail_fixture;


SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: allowlist; Type: TABLE; Schema: veritrail_fixture; Owner: -
--

CREATE TABLE veritrail_fixture.allowlist (
    id text NOT NULL,
    env_id text NOT NULL,
    fingerprint text NOT NULL,
    artifact_name text NOT NULL,
    description text NOT NULL,
    allowed_by text NOT NULL,
    "timestamp" double precision NOT NULL
);


--
-- Name: api_keys; Type: TABLE; Schema: veritrail_fixture; Owner: -
--

CREATE TABLE veritrail_fixture.api_keys (
    id text NOT NULL,
    hash bytea NOT NULL,
    org_id text DEFAULT ''::text NOT NULL,
    user_id text DEFAULT ''::text NOT NULL,
    name text NOT NULL,
    role text NOT NULL,
    created_at double precision NOT NULL,
    expires_at double precision DEFAULT 0 NOT NULL,
    revoked integer DEFAULT 0 NOT NULL,
    service_account_id text DEFAULT ''::text NOT NULL,
    description text DEFAULT ''::text NOT NULL
);


--
-- Name: applied_messages; Type: TABLE; Schema: veritrail_fixture; Owner: -
--

CREATE TABLE veritrail_fixture.applied_messages (
    id text NOT NULL,
    trail_id text NOT NULL,
    applied_at double precision NOT NULL,
    generation bigint DEFAULT 0 NOT NULL
);


--
-- Name: approvals; Type: TABLE; Schema: veritrail_fixture; Owner: -
--

CREATE TABLE veritrail_fixture.approvals (
    id text NOT NULL,
    org_id text NOT NULL,
    flow_id text NOT NULL,
    number integer NOT NULL,
    state text NOT NULL,
    created_at double precision NOT NULL,
    doc text NOT NULL
);


--
-- Name: artifacts; Type: TABLE; Schema: veritrail_fixture; Owner: -
--

CREATE TABLE veritrail_fixture.artifacts (
    seq bigint NOT NULL,
    id text NOT NULL,
    org_id text NOT NULL,
    flow_id text NOT NULL,
    trail_id text NOT NULL,
    fingerprint text NOT NULL,
    template_name text NOT NULL,
    filename text NOT NULL,
    git_commit text NOT NULL,
    repo_name text NOT NULL,
    report text NOT NULL,
    reported_by text NOT NULL,
    created_at double precision NOT NULL,
    state text NOT NULL
);


--
-- Name: artifacts_seq_seq; Type: SEQUENCE; Schema: veritrail_fixture; Owner: -
--

CREATE SEQUENCE veritrail_fixture.artifacts_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: artifacts_seq_seq; Type: SEQUENCE OWNED BY; Schema: veritrail_fixture; Owner: -
--

ALTER SEQUENCE veritrail_fixture.artifacts_seq_seq OWNED BY veritrail_fixture.artifacts.seq;


--
-- Name: attestations; Type: TABLE; Schema: veritrail_fixture; Owner: -
--

CREATE TABLE veritrail_fixture.attestations (
    seq bigint NOT NULL,
    id text NOT NULL,
    org_id text NOT NULL,
    flow_id text NOT NULL,
    trail_id text NOT NULL,
    name text NOT NULL,
    type text NOT NULL,
    is_compliant integer NOT NULL,
    artifact_fingerprint text NOT NULL,
    target_artifact text NOT NULL,
    overrides_id text NOT NULL,
    override_reason text NOT NULL,
    evidence_sha256 text NOT NULL,
    evidence_name text NOT NULL,
    data text NOT NULL,
    reported_by text NOT NULL,
    created_at double precision NOT NULL
);


--
-- Name: attestations_seq_seq; Type: SEQUENCE; Schema: veritrail_fixture; Owner: -
--

CREATE SEQUENCE veritrail_fixture.attestations_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: attestations_seq_seq; Type: SEQUENCE OWNED BY; Schema: veritrail_fixture; Owner: -
--

ALTER SEQUENCE veritrail_fixture.attestations_seq_seq OWNED BY veritrail_fixture.attestations.seq;


--
-- Name: audit_log; Type: TABLE; Schema: veritrail_fixture; Owner: -
--

CREATE TABLE veritrail_fixture.audit_log (
    seq bigint NOT NULL,
    id text NOT NULL,
    org_id text NOT NULL,
    key_id text NOT NULL,
    actor text NOT NULL,
    operation text NOT NULL,
    target text NOT NULL,
    outcome text NOT NULL,
    at double precision NOT NULL
);


--
-- Name: audit_log_seq_seq; Type: SEQUENCE; Schema: veritrail_fixture; Owner: -
--

CREATE SEQUENCE veritrail_fixture.audit_log_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: audit_log_seq_seq; Type: SEQUENCE OWNED BY; Schema: veritrail_fixture; Owner: -
--

ALTER SEQUENCE veritrail_fixture.audit_log_seq_seq OWNED BY veritrail_fixture.audit_log.seq;


--
-- Name: bus_positions; Type: TABLE; Schema: veritrail_fixture; Owner: -
--

CREATE TABLE veritrail_fixture.bus_positions (
    topic text NOT NULL,
    part integer NOT NULL,
    next_offset bigint NOT NULL
);


--
-- Name: control_versions; Type: TABLE; Schema: veritrail_fixture; Owner: -
--

CREATE TABLE veritrail_fixture.control_versions (
    org_id text NOT NULL,
    identifier text NOT NULL,
    version integer NOT NULL,
    name text NOT NULL,
    description text NOT NULL,
    created_by text NOT NULL,
    created_at double precision NOT NULL
);


--
-- Name: controls; Type: TABLE; Schema: veritrail_fixture; Owner: -
--

CREATE TABLE veritrail_fixture.controls (
    org_id text NOT NULL,
    identifier text NOT NULL,
    archived integer DEFAULT 0 NOT NULL,
    tags text DEFAULT '{}'::text NOT NULL
);


--
-- Name: custom_type_versions; Type: TABLE; Schema: veritrail_fixture; Owner: -
--

CREATE TABLE veritrail_fixture.custom_type_versions (
    org_id text NOT NULL,
    name text NOT NULL,
    version integer NOT NULL,
    schema_json text NOT NULL,
    rules text NOT NULL,
    created_by text NOT NULL,
    created_at double precision NOT NULL
);


--
-- Name: custom_types; Type: TABLE; Schema: veritrail_fixture; Owner: -
--

CREATE TABLE veritrail_fixture.custom_types (
    org_id text NOT NULL,
    name text NOT NULL,
    description text NOT NULL,
    archived integer DEFAULT 0 NOT NULL
);


--
-- Name: dirty_trails; Type: TABLE; Schema: veritrail_fixture; Owner: -
--

CREATE TABLE veritrail_fixture.dirty_trails (
    trail_id text NOT NULL,
    generation bigint NOT NULL,
    evaluated bigint DEFAULT 0 NOT NULL
);


--
-- Name: env_events; Type: TABLE; Schema: veritrail_fixture; Owner: -
--

CREATE TABLE veritrail_fixture.env_events (
    seq bigint NOT NULL,
    env_id text NOT NULL,
    snapshot_index integer NOT NULL,
    type text NOT NULL,
    artifact_name text NOT NULL,
    fingerprint text NOT NULL,
    description text NOT NULL,
    reported_at double precision NOT NULL,
    repo_names text NOT NULL,
    doc text NOT NULL
);


--
-- Name: env_events_seq_seq; Type: SEQUENCE; Schema: veritrail_fixture; Owner: -
--

CREATE SEQUENCE veritrail_fixture.env_events_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: env_events_seq_seq; Type: SEQUENCE OWNED BY; Schema: veritrail_fixture; Owner: -
--

ALTER SEQUENCE veritrail_fixture.env_events_seq_seq OWNED BY veritrail_fixture.env_events.seq;


--
-- Name: env_members; Type: TABLE; Schema: veritrail_fixture; Owner: -
--

CREATE TABLE veritrail_fixture.env_members (
    logical_id text NOT NULL,
    physical_id text NOT NULL
);


--
-- Name: env_policies; Type: TABLE; Schema: veritrail_fixture; Owner: -
--

CREATE TABLE veritrail_fixture.env_policies (
    seq bigint NOT NULL,
    env_id text NOT NULL,
    org_id text NOT NULL,
    policy_name text NOT NULL,
    attached_at double precision NOT NULL
);


--
-- Name: env_policies_seq_seq; Type: SEQUENCE; Schema: veritrail_fixture; Owner: -
--

CREATE SEQUENCE veritrail_fixture.env_policies_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: env_policies_seq_seq; Type: SEQUENCE OWNED BY; Schema: veritrail_fixture; Owner: -
--

ALTER SEQUENCE veritrail_fixture.env_policies_seq_seq OWNED BY veritrail_fixture.env_policies.seq;


--
-- Name: env_running; Type: TABLE; Schema: veritrail_fixture; Owner: -
--

CREATE TABLE veritrail_fixture.env_running (
    env_id text NOT NULL,
    org_id text NOT NULL,
    fingerprint text NOT NULL,
    name text NOT NULL,
    since double precision NOT NULL
);


--
-- Name: env_verdicts; Type: TABLE; Schema: veritrail_fixture; Owner: -
--

CREATE TABLE veritrail_fixture.env_verdicts (
    env_id text NOT NULL,
    fingerprint text NOT NULL,
    name text NOT NULL,
    org_id text NOT NULL,
    input_hash text NOT NULL,
    compliant integer NOT NULL,
    allowlisted integer NOT NULL,
    failed integer NOT NULL,
    policies text NOT NULL,
    evaluated_at double precision NOT NULL
);


--
-- Name: environments; Type: TABLE; Schema: veritrail_fixture; Owner: -
--

CREATE TABLE veritrail_fixture.environments (
    id text NOT NULL,
    org_id text NOT NULL,
    name text NOT NULL,
    type text NOT NULL,
    description text NOT NULL,
    include_scaling integer NOT NULL,
    require_provenance integer NOT NULL,
    included text NOT NULL,
    tags text NOT NULL,
    archived integer DEFAULT 0 NOT NULL,
    created_at double precision NOT NULL,
    last_modified_at double precision NOT NULL,
    last_reported_at double precision DEFAULT 0 NOT NULL,
    last_changed_at double precision DEFAULT 0 NOT NULL,
    state integer
);


--
-- Name: flows; Type: TABLE; Schema: veritrail_fixture; Owner: -
--

CREATE TABLE veritrail_fixture.flows (
    id text NOT NULL,
    org_id text NOT NULL,
    name text NOT NULL,
    description text NOT NULL,
    visibility text NOT NULL,
    template_id text NOT NULL,
    tags text NOT NULL,
    repo_url text DEFAULT ''::text NOT NULL,
    archived integer DEFAULT 0 NOT NULL,
    created_at double precision NOT NULL,
    last_modified_at double precision NOT NULL
);


--
-- Name: memberships; Type: TABLE; Schema: veritrail_fixture; Owner: -
--

CREATE TABLE veritrail_fixture.memberships (
    user_id text NOT NULL,
    org_id text NOT NULL,
    role text NOT NULL
);


--
-- Name: notification_rules; Type: TABLE; Schema: veritrail_fixture; Owner: -
--

CREATE TABLE veritrail_fixture.notification_rules (
    id text NOT NULL,
    org_id text NOT NULL,
    number bigint NOT NULL,
    name text NOT NULL,
    environments text NOT NULL,
    triggers text NOT NULL,
    targets text NOT NULL,
    created_by text NOT NULL,
    created_at double precision NOT NULL,
    last_modified_at double precision NOT NULL,
    deleted integer DEFAULT 0 NOT NULL
);


--
-- Name: notify_deliveries; Type: TABLE; Schema: veritrail_fixture; Owner: -
--

CREATE TABLE veritrail_fixture.notify_deliveries (
    org text NOT NULL,
    rule bigint NOT NULL,
    target text NOT NULL,
    event text NOT NULL,
    notifier text NOT NULL,
    payload text NOT NULL,
    state integer NOT NULL,
    lease_until bigint NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    settled_at bigint DEFAULT 0 NOT NULL,
    failed_at bigint DEFAULT 0 NOT NULL,
    retryable integer DEFAULT 0 NOT NULL,
    reason text DEFAULT ''::text NOT NULL,
    message text DEFAULT ''::text NOT NULL,
    exhausted integer DEFAULT 0 NOT NULL
);


--
-- Name: notify_outcomes; Type: TABLE; Schema: veritrail_fixture; Owner: -
--

CREATE TABLE veritrail_fixture.notify_outcomes (
    org text NOT NULL,
    rule bigint NOT NULL,
    target text NOT NULL,
    last_success_at bigint DEFAULT 0 NOT NULL,
    last_failure_at bigint DEFAULT 0 NOT NULL,
    last_failure_reason text DEFAULT ''::text NOT NULL,
    last_failure_message text DEFAULT ''::text NOT NULL
);


--
-- Name: orgs; Type: TABLE; Schema: veritrail_fixture; Owner: -
--

CREATE TABLE veritrail_fixture.orgs (
    id text NOT NULL,
    name text NOT NULL,
    public integer DEFAULT 0 NOT NULL,
    created_at double precision NOT NULL
);


--
-- Name: policies; Type: TABLE; Schema: veritrail_fixture; Owner: -
--

CREATE TABLE veritrail_fixture.policies (
    org_id text NOT NULL,
    name text NOT NULL,
    description text NOT NULL,
    created_by text NOT NULL,
    created_at double precision NOT NULL
);


--
-- Name: policy_evaluations; Type: TABLE; Schema: veritrail_fixture; Owner: -
--

CREATE TABLE veritrail_fixture.policy_evaluations (
    org_id text NOT NULL,
    input_hash text NOT NULL,
    policy_id text NOT NULL,
    compliant integer NOT NULL,
    failed integer NOT NULL,
    doc_id text NOT NULL
);


--
-- Name: policy_versions; Type: TABLE; Schema: veritrail_fixture; Owner: -
--

CREATE TABLE veritrail_fixture.policy_versions (
    org_id text NOT NULL,
    name text NOT NULL,
    version integer NOT NULL,
    format text NOT NULL,
    content text NOT NULL,
    content_id text NOT NULL,
    comment text NOT NULL,
    created_by text NOT NULL,
    created_at double precision NOT NULL
);


--
-- Name: rejected_messages; Type: TABLE; Schema: veritrail_fixture; Owner: -
--

CREATE TABLE veritrail_fixture.rejected_messages (
    seq bigint NOT NULL,
    id text NOT NULL,
    org_id text NOT NULL,
    kind text NOT NULL,
    partition_key text NOT NULL,
    payload bytea NOT NULL,
    reason text NOT NULL,
    class text NOT NULL,
    rejected_at double precision NOT NULL,
    state text NOT NULL,
    requested_at double precision DEFAULT 0 NOT NULL,
    replayed_at double precision DEFAULT 0 NOT NULL
);


--
-- Name: rejected_messages_seq_seq; Type: SEQUENCE; Schema: veritrail_fixture; Owner: -
--

CREATE SEQUENCE veritrail_fixture.rejected_messages_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: rejected_messages_seq_seq; Type: SEQUENCE OWNED BY; Schema: veritrail_fixture; Owner: -
--

ALTER SEQUENCE veritrail_fixture.rejected_messages_seq_seq OWNED BY veritrail_fixture.rejected_messages.seq;


--
-- Name: rule_docs; Type: TABLE; Schema: veritrail_fixture; Owner: -
--

CREATE TABLE veritrail_fixture.rule_docs (
    org_id text NOT NULL,
    id text NOT NULL,
    doc text NOT NULL
);


--
-- Name: schema_version; Type: TABLE; Schema: veritrail_fixture; Owner: -
--

CREATE TABLE veritrail_fixture.schema_version (
    digest text NOT NULL,
    migrated_at text NOT NULL
);


--
-- Name: service_accounts; Type: TABLE; Schema: veritrail_fixture; Owner: -
--

CREATE TABLE veritrail_fixture.service_accounts (
    id text NOT NULL,
    org_id text NOT NULL,
    name text NOT NULL,
    description text NOT NULL,
    privilege text NOT NULL,
    created_by text NOT NULL,
    created_at double precision NOT NULL,
    last_modified_at double precision NOT NULL
);


--
-- Name: snapshot_digests; Type: TABLE; Schema: veritrail_fixture; Owner: -
--

CREATE TABLE veritrail_fixture.snapshot_digests (
    env_id text NOT NULL,
    idx integer NOT NULL,
    digest bytea
);


--
-- Name: snapshot_policies; Type: TABLE; Schema: veritrail_fixture; Owner: -
--

CREATE TABLE veritrail_fixture.snapshot_policies (
    env_id text NOT NULL,
    idx integer NOT NULL,
    policies text NOT NULL
);


--
-- Name: snapshots; Type: TABLE; Schema: veritrail_fixture; Owner: -
--

CREATE TABLE veritrail_fixture.snapshots (
    env_id text NOT NULL,
    idx integer NOT NULL,
    "timestamp" double precision NOT NULL,
    type text NOT NULL,
    compliant integer,
    artifacts text NOT NULL
);


--
-- Name: templates; Type: TABLE; Schema: veritrail_fixture; Owner: -
--

CREATE TABLE veritrail_fixture.templates (
    id text NOT NULL,
    content text NOT NULL
);


--
-- Name: trail_events; Type: TABLE; Schema: veritrail_fixture; Owner: -
--

CREATE TABLE veritrail_fixture.trail_events (
    seq bigint NOT NULL,
    trail_id text NOT NULL,
    doc text NOT NULL,
    created_at double precision NOT NULL
);


--
-- Name: trail_events_seq_seq; Type: SEQUENCE; Schema: veritrail_fixture; Owner: -
--

CREATE SEQUENCE veritrail_fixture.trail_events_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: trail_events_seq_seq; Type: SEQUENCE OWNED BY; Schema: veritrail_fixture; Owner: -
--

ALTER SEQUENCE veritrail_fixture.trail_events_seq_seq OWNED BY veritrail_fixture.trail_events.seq;


--
-- Name: trails; Type: TABLE; Schema: veritrail_fixture; Owner: -
--

CREATE TABLE veritrail_fixture.trails (
    id text NOT NULL,
    org_id text NOT NULL,
    flow_id text NOT NULL,
    name text NOT NULL,
    doc text NOT NULL,
    template_id text NOT NULL,
    created_by text NOT NULL,
    created_at double precision NOT NULL,
    last_modified_at double precision NOT NULL,
    state text NOT NULL,
    compliance text NOT NULL,
    evaluated_at double precision DEFAULT 0 NOT NULL
);


--
-- Name: trigger_outbox; Type: TABLE; Schema: veritrail_fixture; Owner: -
--

CREATE TABLE veritrail_fixture.trigger_outbox (
    seq bigint NOT NULL,
    id text NOT NULL,
    org_id text NOT NULL,
    env_id text NOT NULL,
    at double precision NOT NULL,
    payload text NOT NULL,
    sent_at double precision DEFAULT 0 NOT NULL
);


--
-- Name: trigger_outbox_seq_seq; Type: SEQUENCE; Schema: veritrail_fixture; Owner: -
--

CREATE SEQUENCE veritrail_fixture.trigger_outbox_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;


--
-- Name: trigger_outbox_seq_seq; Type: SEQUENCE OWNED BY; Schema: veritrail_fixture; Owner: -
--

ALTER SEQUENCE veritrail_fixture.trigger_outbox_seq_seq OWNED BY veritrail_fixture.trigger_outbox.seq;


--
-- Name: users; Type: TABLE; Schema: veritrail_fixture; Owner: -
--

CREATE TABLE veritrail_fixture.users (
    id text NOT NULL,
    name text NOT NULL,
    display_name text NOT NULL,
    created_at double precision NOT NULL
);


--
-- Name: writes_in_flight; Type: TABLE; Schema: veritrail_fixture; Owner: -
--

CREATE TABLE veritrail_fixture.writes_in_flight (
    org_id text NOT NULL,
    process text NOT NULL,
    until double precision NOT NULL
);


--
-- Name: artifacts seq; Type: DEFAULT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.artifacts ALTER COLUMN seq SET DEFAULT nextval('veritrail_fixture.artifacts_seq_seq'::regclass);


--
-- Name: attestations seq; Type: DEFAULT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.attestations ALTER COLUMN seq SET DEFAULT nextval('veritrail_fixture.attestations_seq_seq'::regclass);


--
-- Name: audit_log seq; Type: DEFAULT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.audit_log ALTER COLUMN seq SET DEFAULT nextval('veritrail_fixture.audit_log_seq_seq'::regclass);


--
-- Name: env_events seq; Type: DEFAULT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.env_events ALTER COLUMN seq SET DEFAULT nextval('veritrail_fixture.env_events_seq_seq'::regclass);


--
-- Name: env_policies seq; Type: DEFAULT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.env_policies ALTER COLUMN seq SET DEFAULT nextval('veritrail_fixture.env_policies_seq_seq'::regclass);


--
-- Name: rejected_messages seq; Type: DEFAULT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.rejected_messages ALTER COLUMN seq SET DEFAULT nextval('veritrail_fixture.rejected_messages_seq_seq'::regclass);


--
-- Name: trail_events seq; Type: DEFAULT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.trail_events ALTER COLUMN seq SET DEFAULT nextval('veritrail_fixture.trail_events_seq_seq'::regclass);


--
-- Name: trigger_outbox seq; Type: DEFAULT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.trigger_outbox ALTER COLUMN seq SET DEFAULT nextval('veritrail_fixture.trigger_outbox_seq_seq'::regclass);


--
-- Data for Name: allowlist; Type: TABLE DATA; Schema: veritrail_fixture; Owner: -
--



--
-- Data for Name: api_keys; Type: TABLE DATA; Schema: veritrail_fixture; Owner: -
--



--
-- Data for Name: applied_messages; Type: TABLE DATA; Schema: veritrail_fixture; Owner: -
--



--
-- Data for Name: approvals; Type: TABLE DATA; Schema: veritrail_fixture; Owner: -
--



--
-- Data for Name: artifacts; Type: TABLE DATA; Schema: veritrail_fixture; Owner: -
--

INSERT INTO veritrail_fixture.artifacts VALUES (1, 'art-1', 'org-fixture', 'flow-1', 'trail-1', 'a3f5c1e0b7d24c6e9f8a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6a', 'app', 'app.tar', '0123456789abcdef0123456789abcdef01234567', 'acme/backend', '{"size":42}', 'ci', 1700000003, 'INCOMPLETE');


--
-- Data for Name: attestations; Type: TABLE DATA; Schema: veritrail_fixture; Owner: -
--

INSERT INTO veritrail_fixture.attestations VALUES (1, 'att-1', 'org-fixture', 'flow-1', 'trail-1', 'unit-tests', 'junit', 1, 'a3f5c1e0b7d24c6e9f8a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6a', 'app', '', '', '', '', '{"passed":12}', 'ci', 1700000004);


--
-- Data for Name: audit_log; Type: TABLE DATA; Schema: veritrail_fixture; Owner: -
--



--
-- Data for Name: bus_positions; Type: TABLE DATA; Schema: veritrail_fixture; Owner: -
--



--
-- Data for Name: control_versions; Type: TABLE DATA; Schema: veritrail_fixture; Owner: -
--



--
-- Data for Name: controls; Type: TABLE DATA; Schema: veritrail_fixture; Owner: -
--



--
-- Data for Name: custom_type_versions; Type: TABLE DATA; Schema: veritrail_fixture; Owner: -
--



--
-- Data for Name: custom_types; Type: TABLE DATA; Schema: veritrail_fixture; Owner: -
--



--
-- Data for Name: dirty_trails; Type: TABLE DATA; Schema: veritrail_fixture; Owner: -
--



--
-- Data for Name: env_events; Type: TABLE DATA; Schema: veritrail_fixture; Owner: -
--



--
-- Data for Name: env_members; Type: TABLE DATA; Schema: veritrail_fixture; Owner: -
--



--
-- Data for Name: env_policies; Type: TABLE DATA; Schema: veritrail_fixture; Owner: -
--



--
-- Data for Name: env_running; Type: TABLE DATA; Schema: veritrail_fixture; Owner: -
--



--
-- Data for Name: env_verdicts; Type: TABLE DATA; Schema: veritrail_fixture; Owner: -
--



--
-- Data for Name: environments; Type: TABLE DATA; Schema: veritrail_fixture; Owner: -
--



--
-- Data for Name: flows; Type: TABLE DATA; Schema: veritrail_fixture; Owner: -
--

INSERT INTO veritrail_fixture.flows VALUES ('flow-1', 'org-fixture', 'backend', 'the backend', 'private', 'tpl-1', '{"team":"core"}', '', 0, 1700000001, 1700000001);


--
-- Data for Name: memberships; Type: TABLE DATA; Schema: veritrail_fixture; Owner: -
--



--
-- Data for Name: notification_rules; Type: TABLE DATA; Schema: veritrail_fixture; Owner: -
--



--
-- Data for Name: notify_deliveries; Type: TABLE DATA; Schema: veritrail_fixture; Owner: -
--



--
-- Data for Name: notify_outcomes; Type: TABLE DATA; Schema: veritrail_fixture; Owner: -
--



--
-- Data for Name: orgs; Type: TABLE DATA; Schema: veritrail_fixture; Owner: -
--

INSERT INTO veritrail_fixture.orgs VALUES ('org-fixture', 'acme', 0, 1700000000);


--
-- Data for Name: policies; Type: TABLE DATA; Schema: veritrail_fixture; Owner: -
--



--
-- Data for Name: policy_evaluations; Type: TABLE DATA; Schema: veritrail_fixture; Owner: -
--



--
-- Data for Name: policy_versions; Type: TABLE DATA; Schema: veritrail_fixture; Owner: -
--



--
-- Data for Name: rejected_messages; Type: TABLE DATA; Schema: veritrail_fixture; Owner: -
--



--
-- Data for Name: rule_docs; Type: TABLE DATA; Schema: veritrail_fixture; Owner: -
--



--
-- Data for Name: schema_version; Type: TABLE DATA; Schema: veritrail_fixture; Owner: -
--

INSERT INTO veritrail_fixture.schema_version VALUES ('6fe6a6dce0cb03c51bf6736500afecaebfc36e19bfb89dc86f84b752d34304c3', '2026-11-25T18:13:10Z');


--
-- Data for Name: service_accounts; Type: TABLE DATA; Schema: veritrail_fixture; Owner: -
--



--
-- Data for Name: snapshot_digests; Type: TABLE DATA; Schema: veritrail_fixture; Owner: -
--



--
-- Data for Name: snapshot_policies; Type: TABLE DATA; Schema: veritrail_fixture; Owner: -
--



--
-- Data for Name: snapshots; Type: TABLE DATA; Schema: veritrail_fixture; Owner: -
--



--
-- Data for Name: templates; Type: TABLE DATA; Schema: veritrail_fixture; Owner: -
--

INSERT INTO veritrail_fixture.templates VALUES ('tpl-1', 'version: 1
trail:
  artifacts:
    - name: app
');


--
-- Data for Name: trail_events; Type: TABLE DATA; Schema: veritrail_fixture; Owner: -
--



--
-- Data for Name: trails; Type: TABLE DATA; Schema: veritrail_fixture; Owner: -
--

INSERT INTO veritrail_fixture.trails VALUES ('trail-1', 'org-fixture', 'flow-1', 'v1.0.0', '{}', 'tpl-1', 'ci', 1700000002, 1700000002, 'INCOMPLETE', '', 0);


--
-- Data for Name: trigger_outbox; Type: TABLE DATA; Schema: veritrail_fixture; Owner: -
--



--
-- Data for Name: users; Type: TABLE DATA; Schema: veritrail_fixture; Owner: -
--



--
-- Data for Name: writes_in_flight; Type: TABLE DATA; Schema: veritrail_fixture; Owner: -
--



--
-- Name: artifacts_seq_seq; Type: SEQUENCE SET; Schema: veritrail_fixture; Owner: -
--

SELECT pg_catalog.setval('veritrail_fixture.artifacts_seq_seq', 1, true);


--
-- Name: attestations_seq_seq; Type: SEQUENCE SET; Schema: veritrail_fixture; Owner: -
--

SELECT pg_catalog.setval('veritrail_fixture.attestations_seq_seq', 1, true);


--
-- Name: audit_log_seq_seq; Type: SEQUENCE SET; Schema: veritrail_fixture; Owner: -
--

SELECT pg_catalog.setval('veritrail_fixture.audit_log_seq_seq', 1, false);


--
-- Name: env_events_seq_seq; Type: SEQUENCE SET; Schema: veritrail_fixture; Owner: -
--

SELECT pg_catalog.setval('veritrail_fixture.env_events_seq_seq', 1, false);


--
-- Name: env_policies_seq_seq; Type: SEQUENCE SET; Schema: veritrail_fixture; Owner: -
--

SELECT pg_catalog.setval('veritrail_fixture.env_policies_seq_seq', 1, false);


--
-- Name: rejected_messages_seq_seq; Type: SEQUENCE SET; Schema: veritrail_fixture; Owner: -
--

SELECT pg_catalog.setval('veritrail_fixture.rejected_messages_seq_seq', 1, false);


--
-- Name: trail_events_seq_seq; Type: SEQUENCE SET; Schema: veritrail_fixture; Owner: -
--

SELECT pg_catalog.setval('veritrail_fixture.trail_events_seq_seq', 1, false);


--
-- Name: trigger_outbox_seq_seq; Type: SEQUENCE SET; Schema: veritrail_fixture; Owner: -
--

SELECT pg_catalog.setval('veritrail_fixture.trigger_outbox_seq_seq', 1, false);


--
-- Name: allowlist allowlist_pkey; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.allowlist
    ADD CONSTRAINT allowlist_pkey PRIMARY KEY (id);


--
-- Name: api_keys api_keys_hash_key; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.api_keys
    ADD CONSTRAINT api_keys_hash_key UNIQUE (hash);


--
-- Name: api_keys api_keys_pkey; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.api_keys
    ADD CONSTRAINT api_keys_pkey PRIMARY KEY (id);


--
-- Name: applied_messages applied_messages_pkey; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.applied_messages
    ADD CONSTRAINT applied_messages_pkey PRIMARY KEY (id);


--
-- Name: approvals approvals_flow_id_number_key; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.approvals
    ADD CONSTRAINT approvals_flow_id_number_key UNIQUE (flow_id, number);


--
-- Name: approvals approvals_pkey; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.approvals
    ADD CONSTRAINT approvals_pkey PRIMARY KEY (id);


--
-- Name: artifacts artifacts_id_key; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.artifacts
    ADD CONSTRAINT artifacts_id_key UNIQUE (id);


--
-- Name: artifacts artifacts_pkey; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.artifacts
    ADD CONSTRAINT artifacts_pkey PRIMARY KEY (seq);


--
-- Name: attestations attestations_id_key; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.attestations
    ADD CONSTRAINT attestations_id_key UNIQUE (id);


--
-- Name: attestations attestations_pkey; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.attestations
    ADD CONSTRAINT attestations_pkey PRIMARY KEY (seq);


--
-- Name: audit_log audit_log_id_key; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.audit_log
    ADD CONSTRAINT audit_log_id_key UNIQUE (id);


--
-- Name: audit_log audit_log_pkey; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.audit_log
    ADD CONSTRAINT audit_log_pkey PRIMARY KEY (seq);


--
-- Name: bus_positions bus_positions_pkey; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.bus_positions
    ADD CONSTRAINT bus_positions_pkey PRIMARY KEY (topic, part);


--
-- Name: control_versions control_versions_pkey; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.control_versions
    ADD CONSTRAINT control_versions_pkey PRIMARY KEY (org_id, identifier, version);


--
-- Name: controls controls_pkey; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.controls
    ADD CONSTRAINT controls_pkey PRIMARY KEY (org_id, identifier);


--
-- Name: custom_type_versions custom_type_versions_pkey; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.custom_type_versions
    ADD CONSTRAINT custom_type_versions_pkey PRIMARY KEY (org_id, name, version);


--
-- Name: custom_types custom_types_pkey; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.custom_types
    ADD CONSTRAINT custom_types_pkey PRIMARY KEY (org_id, name);


--
-- Name: dirty_trails dirty_trails_pkey; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.dirty_trails
    ADD CONSTRAINT dirty_trails_pkey PRIMARY KEY (trail_id);


--
-- Name: env_events env_events_pkey; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.env_events
    ADD CONSTRAINT env_events_pkey PRIMARY KEY (seq);


--
-- Name: env_members env_members_pkey; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.env_members
    ADD CONSTRAINT env_members_pkey PRIMARY KEY (logical_id, physical_id);


--
-- Name: env_policies env_policies_env_id_policy_name_key; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.env_policies
    ADD CONSTRAINT env_policies_env_id_policy_name_key UNIQUE (env_id, policy_name);


--
-- Name: env_policies env_policies_pkey; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.env_policies
    ADD CONSTRAINT env_policies_pkey PRIMARY KEY (seq);


--
-- Name: env_running env_running_pkey; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.env_running
    ADD CONSTRAINT env_running_pkey PRIMARY KEY (env_id, fingerprint, name);


--
-- Name: env_verdicts env_verdicts_pkey; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.env_verdicts
    ADD CONSTRAINT env_verdicts_pkey PRIMARY KEY (env_id, fingerprint, name);


--
-- Name: environments environments_org_id_name_key; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.environments
    ADD CONSTRAINT environments_org_id_name_key UNIQUE (org_id, name);


--
-- Name: environments environments_pkey; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.environments
    ADD CONSTRAINT environments_pkey PRIMARY KEY (id);


--
-- Name: flows flows_org_id_name_key; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.flows
    ADD CONSTRAINT flows_org_id_name_key UNIQUE (org_id, name);


--
-- Name: flows flows_pkey; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.flows
    ADD CONSTRAINT flows_pkey PRIMARY KEY (id);


--
-- Name: memberships memberships_pkey; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.memberships
    ADD CONSTRAINT memberships_pkey PRIMARY KEY (user_id, org_id);


--
-- Name: notification_rules notification_rules_org_id_number_key; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.notification_rules
    ADD CONSTRAINT notification_rules_org_id_number_key UNIQUE (org_id, number);


--
-- Name: notification_rules notification_rules_pkey; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.notification_rules
    ADD CONSTRAINT notification_rules_pkey PRIMARY KEY (id);


--
-- Name: notify_deliveries notify_deliveries_pkey; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.notify_deliveries
    ADD CONSTRAINT notify_deliveries_pkey PRIMARY KEY (org, rule, target, event);


--
-- Name: notify_outcomes notify_outcomes_pkey; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.notify_outcomes
    ADD CONSTRAINT notify_outcomes_pkey PRIMARY KEY (org, rule, target);


--
-- Name: orgs orgs_name_key; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.orgs
    ADD CONSTRAINT orgs_name_key UNIQUE (name);


--
-- Name: orgs orgs_pkey; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.orgs
    ADD CONSTRAINT orgs_pkey PRIMARY KEY (id);


--
-- Name: policies policies_pkey; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.policies
    ADD CONSTRAINT policies_pkey PRIMARY KEY (org_id, name);


--
-- Name: policy_evaluations policy_evaluations_pkey; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.policy_evaluations
    ADD CONSTRAINT policy_evaluations_pkey PRIMARY KEY (org_id, input_hash, policy_id);


--
-- Name: policy_versions policy_versions_pkey; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.policy_versions
    ADD CONSTRAINT policy_versions_pkey PRIMARY KEY (org_id, name, version);


--
-- Name: rejected_messages rejected_messages_id_key; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.rejected_messages
    ADD CONSTRAINT rejected_messages_id_key UNIQUE (id);


--
-- Name: rejected_messages rejected_messages_pkey; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.rejected_messages
    ADD CONSTRAINT rejected_messages_pkey PRIMARY KEY (seq);


--
-- Name: rule_docs rule_docs_pkey; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.rule_docs
    ADD CONSTRAINT rule_docs_pkey PRIMARY KEY (org_id, id);


--
-- Name: service_accounts service_accounts_org_id_name_key; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.service_accounts
    ADD CONSTRAINT service_accounts_org_id_name_key UNIQUE (org_id, name);


--
-- Name: service_accounts service_accounts_pkey; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.service_accounts
    ADD CONSTRAINT service_accounts_pkey PRIMARY KEY (id);


--
-- Name: snapshot_digests snapshot_digests_pkey; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.snapshot_digests
    ADD CONSTRAINT snapshot_digests_pkey PRIMARY KEY (env_id);


--
-- Name: snapshot_policies snapshot_policies_pkey; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.snapshot_policies
    ADD CONSTRAINT snapshot_policies_pkey PRIMARY KEY (env_id, idx);


--
-- Name: snapshots snapshots_pkey; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.snapshots
    ADD CONSTRAINT snapshots_pkey PRIMARY KEY (env_id, idx);


--
-- Name: templates templates_pkey; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.templates
    ADD CONSTRAINT templates_pkey PRIMARY KEY (id);


--
-- Name: trail_events trail_events_pkey; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.trail_events
    ADD CONSTRAINT trail_events_pkey PRIMARY KEY (seq);


--
-- Name: trails trails_flow_id_name_key; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.trails
    ADD CONSTRAINT trails_flow_id_name_key UNIQUE (flow_id, name);


--
-- Name: trails trails_pkey; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.trails
    ADD CONSTRAINT trails_pkey PRIMARY KEY (id);


--
-- Name: trigger_outbox trigger_outbox_id_key; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.trigger_outbox
    ADD CONSTRAINT trigger_outbox_id_key UNIQUE (id);


--
-- Name: trigger_outbox trigger_outbox_pkey; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.trigger_outbox
    ADD CONSTRAINT trigger_outbox_pkey PRIMARY KEY (seq);


--
-- Name: users users_name_key; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.users
    ADD CONSTRAINT users_name_key UNIQUE (name);


--
-- Name: users users_pkey; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.users
    ADD CONSTRAINT users_pkey PRIMARY KEY (id);


--
-- Name: writes_in_flight writes_in_flight_pkey; Type: CONSTRAINT; Schema: veritrail_fixture; Owner: -
--

ALTER TABLE ONLY veritrail_fixture.writes_in_flight
    ADD CONSTRAINT writes_in_flight_pkey PRIMARY KEY (org_id, process);


--
-- Name: allowlist_env; Type: INDEX; Schema: veritrail_fixture; Owner: -
--

CREATE INDEX allowlist_env ON veritrail_fixture.allowlist USING btree (env_id);


--
-- Name: artifacts_commit; Type: INDEX; Schema: veritrail_fixture; Owner: -
--

CREATE INDEX artifacts_commit ON veritrail_fixture.artifacts USING btree (org_id, git_commit);


--
-- Name: artifacts_fp; Type: INDEX; Schema: veritrail_fixture; Owner: -
--

CREATE INDEX artifacts_fp ON veritrail_fixture.artifacts USING btree (org_id, fingerprint);


--
-- Name: artifacts_trail; Type: INDEX; Schema: veritrail_fixture; Owner: -
--

CREATE INDEX artifacts_trail ON veritrail_fixture.artifacts USING btree (trail_id);


--
-- Name: attestations_org; Type: INDEX; Schema: veritrail_fixture; Owner: -
--

CREATE INDEX attestations_org ON veritrail_fixture.attestations USING btree (org_id, seq);


--
-- Name: attestations_trail_facts; Type: INDEX; Schema: veritrail_fixture; Owner: -
--

CREATE INDEX attestations_trail_facts ON veritrail_fixture.attestations USING btree (trail_id, seq, id, name, type, is_compliant, artifact_fingerprint, target_artifact, overrides_id, created_at);


--
-- Name: audit_log_org; Type: INDEX; Schema: veritrail_fixture; Owner: -
--

CREATE INDEX audit_log_org ON veritrail_fixture.audit_log USING btree (org_id, at);


--
-- Name: env_events_env; Type: INDEX; Schema: veritrail_fixture; Owner: -
--

CREATE INDEX env_events_env ON veritrail_fixture.env_events USING btree (env_id, seq);


--
-- Name: env_events_fp; Type: INDEX; Schema: veritrail_fixture; Owner: -
--

CREATE INDEX env_events_fp ON veritrail_fixture.env_events USING btree (fingerprint);


--
-- Name: env_members_physical; Type: INDEX; Schema: veritrail_fixture; Owner: -
--

CREATE INDEX env_members_physical ON veritrail_fixture.env_members USING btree (physical_id);


--
-- Name: env_policies_policy; Type: INDEX; Schema: veritrail_fixture; Owner: -
--

CREATE INDEX env_policies_policy ON veritrail_fixture.env_policies USING btree (org_id, policy_name);


--
-- Name: env_running_fp; Type: INDEX; Schema: veritrail_fixture; Owner: -
--

CREATE INDEX env_running_fp ON veritrail_fixture.env_running USING btree (org_id, fingerprint);


--
-- Name: notify_dead_letters; Type: INDEX; Schema: veritrail_fixture; Owner: -
--

CREATE INDEX notify_dead_letters ON veritrail_fixture.notify_deliveries USING btree (org, state, failed_at);


--
-- Name: rejected_messages_org; Type: INDEX; Schema: veritrail_fixture; Owner: -
--

CREATE INDEX rejected_messages_org ON veritrail_fixture.rejected_messages USING btree (org_id, seq);


--
-- Name: rejected_messages_state; Type: INDEX; Schema: veritrail_fixture; Owner: -
--

CREATE INDEX rejected_messages_state ON veritrail_fixture.rejected_messages USING btree (state, seq);


--
-- Name: trail_events_trail; Type: INDEX; Schema: veritrail_fixture; Owner: -
--

CREATE INDEX trail_events_trail ON veritrail_fixture.trail_events USING btree (trail_id, seq);


--
-- Name: trails_org; Type: INDEX; Schema: veritrail_fixture; Owner: -
--

CREATE INDEX trails_org ON veritrail_fixture.trails USING btree (org_id, created_at);


--
-- Name: trigger_outbox_pending; Type: INDEX; Schema: veritrail_fixture; Owner: -
--

CREATE INDEX trigger_outbox_pending ON veritrail_fixture.trigger_outbox USING btree (sent_at, seq);


--
-- Name: writes_in_flight_process; Type: INDEX; Schema: veritrail_fixture; Owner: -
--

CREATE INDEX writes_in_flight_process ON veritrail_fixture.writes_in_flight USING btree (process);


--
-- PostgreSQL database dump complete
--

\unrestrict M5ef76L69bNocd2V5ZMAGQz69Doqi9dOA09al8wzZfIEBDWzzTeabgcwTI6jYKv

