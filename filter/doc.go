// Package filter will hold selection and shaping (per-resource rules, CEL filters, quiet
// updates, pruning, Secret redaction). It has no code yet: today the relay selects with
// server-side label and field selectors and namespaces only, and strips managedFields.
package filter
