package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/openapi"

	"github.com/kube-nats-relay/kube-nats-relay/filter"
	"github.com/kube-nats-relay/kube-nats-relay/relay"
)

// schemaAttempts and schemaWait bound how long startup waits for the apiserver's OpenAPI v3
// documents when reading them fails for a reason that may pass (a timeout, a 5xx): the
// apiserver just answered discovery, so a few seconds; then the relay starts without them
// (expressions checked as dyn, no ce-dataschema) and says so, rather than exiting into a
// restart loop over a check that evaluation does not need.
//
// schemaDeadline bounds all of it, however many documents and retries: a read the apiserver
// never answers would otherwise hold startup for the client's timeout (32 s) per attempt
// and document. What is not read by then is checked as dyn.
const (
	schemaAttempts = 3
	schemaWait     = 2 * time.Second
	schemaDeadline = 15 * time.Second
)

// resourceSchema is what the apiserver's OpenAPI v3 documents say about one resource.
type resourceSchema struct {
	// component names the kind's schema in its group and version's document; "" when
	// unknown.
	component string
	// typing types the resource's CEL expressions; nil when unknown.
	typing *filter.Schema
	// untyped says why typing is nil or untyped, for the log.
	untyped string
}

// loadSchemas reads, once per group and version, the OpenAPI v3 documents of the resources
// for which need is true, and returns what they say about each resource (nothing for the
// others). Documents are read whole (the core group's is the largest, about 1 MB of JSON)
// and dropped once the resources' schemas are taken from them. A document the server does
// not publish (an aggregated API without OpenAPI v3) leaves its resources unknown; failing
// reads are retried (schemaAttempts), then leave them unknown with a warning; so does
// everything not read within the deadline within (schemaDeadline).
func loadSchemas(ctx context.Context, oc openapi.ClientWithContext, resources []relay.Resource, need []bool, within time.Duration) []resourceSchema {
	log := zerolog.Ctx(ctx)
	ctx, cancel := context.WithTimeoutCause(ctx, within,
		fmt.Errorf("not read within %s, the bound on reading OpenAPI v3 schemas at startup", within))
	defer cancel()
	out := make([]resourceSchema, len(resources))
	wanted := false
	for i := range resources {
		wanted = wanted || need[i]
	}
	if !wanted {
		return out
	}
	start := time.Now()
	var paths map[string]openapi.GroupVersionWithContext
	err := retrySchema(ctx, "/openapi/v3", func() (err error) {
		paths, err = oc.PathsWithContext(ctx)
		if err == nil && !indexComplete(paths, resources, need) {
			// A CRD established a moment ago is served before the apiserver lists its
			// document: ask again, and take the index as it is after the last attempt.
			err = errIndexIncomplete
		}
		return err
	})
	if errors.Is(err, errIndexIncomplete) {
		err = nil
	}
	if err != nil {
		for i := range out {
			out[i].untyped = fmt.Sprintf("the apiserver's OpenAPI v3 index could not be read: %v", err)
		}
		log.Warn().Err(err).Msg("openapi v3 index unavailable; starting without schemas: CEL expressions checked without types, no ce-dataschema")
		return out
	}
	docs := make(map[string]*filter.OpenAPI)
	failed := make(map[string]string)
	size := 0
	for i, r := range resources {
		if !need[i] {
			continue
		}
		path := openAPIPath(r.GroupVersion())
		if _, done := docs[path]; !done && failed[path] == "" {
			data, reason := readDocument(ctx, paths, path)
			if reason != "" {
				failed[path] = reason
			} else if docs[path], err = filter.ParseOpenAPI(data); err != nil {
				failed[path] = err.Error()
			}
			size += len(data)
		}
		if reason := failed[path]; reason != "" {
			out[i].untyped = reason
			continue
		}
		doc := docs[path]
		out[i].component = doc.Component(r.GroupVersion().WithKind(r.Kind))
		out[i].typing = doc.Schema(out[i].component)
		switch {
		case out[i].component == "":
			out[i].untyped = "the OpenAPI v3 document of its group and version has no schema for kind " + r.Kind
		case !out[i].typing.Typed():
			out[i].untyped = "its schema does not declare the object's fields (x-kubernetes-preserve-unknown-fields, or none)"
		}
	}
	log.Info().Int("documents", len(docs)).Int("bytes", size).Dur("took", time.Since(start)).
		Msg("openapi v3 schemas loaded")
	return out
}

// errIndexIncomplete is retrySchema's reason to read the OpenAPI v3 index again: it lacks
// the document of a resource discovery serves.
var errIndexIncomplete = errors.New("the openapi v3 index lacks a served group and version")

// indexComplete reports whether paths lists the document of every resource need asks for.
func indexComplete(paths map[string]openapi.GroupVersionWithContext, resources []relay.Resource, need []bool) bool {
	for i, r := range resources {
		if _, ok := paths[openAPIPath(r.GroupVersion())]; need[i] && !ok {
			return false
		}
	}
	return true
}

// readDocument reads the OpenAPI v3 document at path (api/v1, apis/apps/v1) as JSON, or
// says why it could not.
func readDocument(ctx context.Context, paths map[string]openapi.GroupVersionWithContext, path string) ([]byte, string) {
	gv, ok := paths[path]
	if !ok {
		return nil, "the apiserver publishes no OpenAPI v3 document for its group and version (/openapi/v3/" + path + ")"
	}
	var data []byte
	err := retrySchema(ctx, "/openapi/v3/"+path, func() (err error) {
		data, err = gv.SchemaWithContext(ctx, runtime.ContentTypeJSON)
		return err
	})
	if err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Str("document", "/openapi/v3/"+path).
			Msg("openapi v3 document unavailable; its resources start without a schema: CEL expressions checked without types, no ce-dataschema")
		return nil, fmt.Sprintf("its OpenAPI v3 document could not be read: %v", err)
	}
	return data, ""
}

// retrySchema runs read until it succeeds, fails for good (not found, forbidden,
// unauthorized: asking again gives the same answer), schemaAttempts are spent, or ctx ends.
func retrySchema(ctx context.Context, what string, read func() error) error {
	for attempt := 1; ; attempt++ {
		err := read()
		if err != nil && ctx.Err() != nil {
			return context.Cause(ctx) // the deadline, or the relay stopping
		}
		if err == nil || attempt == schemaAttempts ||
			apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			return err
		}
		zerolog.Ctx(ctx).Warn().Err(err).Str("document", what).Int("attempt", attempt).
			Int("attempts", schemaAttempts).Stringer("retry_in", schemaWait).Msg("openapi v3 read failed, retrying")
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(schemaWait):
		}
	}
}

// schemaNeeds says, per resource, whether its OpenAPI v3 schema is wanted: to type-check
// the rules' CEL expressions that apply to it, or to name it in ce-dataschema.
func schemaNeeds(cfg Config, specs []ResourceSpec) []bool {
	need := make([]bool, len(specs))
	for i, spec := range specs {
		need[i] = cfg.DataSchemaBaseURL != "" || (cfg.rules != nil && cfg.rules.HasExpressions(spec.Raw))
	}
	return need
}

// checkRuleTypes type-checks the rules file's CEL expressions of each resource against its
// schema (filter.File.CheckTypes), and returns every problem as a *ConfigError naming
// RELAY_RULES_FILE. A resource without a known, typed schema is checked as dyn, with an
// info line saying why; so is a field the defaults read that only some kinds declare.
func checkRuleTypes(ctx context.Context, cfg Config, specs []ResourceSpec, resources []relay.Resource, schemas []resourceSchema) error {
	if cfg.rules == nil {
		return nil
	}
	log := zerolog.Ctx(ctx)
	var names []string
	var typings []*filter.Schema
	for i, spec := range specs {
		if !cfg.rules.HasExpressions(spec.Raw) {
			continue
		}
		s := schemas[i]
		if s.untyped != "" {
			log.Info().Str("resource", resources[i].String()).Str("reason", s.untyped).
				Msg("rules' CEL expressions checked without a schema (object and oldObject are dyn)")
		}
		names = append(names, spec.Raw)
		typings = append(typings, s.typing)
	}
	notes, err := cfg.rules.CheckTypes(names, typings)
	for _, n := range notes {
		log.Info().Str("rules_file", cfg.RulesFile).Str("rule", n.Rule).Str("field", n.Field).
			Int("line", n.ExprLine).Int("column", n.ExprColumn).Str("problem", n.Message).
			Msg("a field the defaults read is undeclared for this kind only; other kinds declare it: accepted as guarded by the kind")
	}
	if err == nil {
		return nil
	}
	var verr *filter.ValidationError
	if !errors.As(err, &verr) {
		return err
	}
	var ps problems
	addRulesProblems(&ps, cfg.RulesFile, err)
	return ps.err()
}
