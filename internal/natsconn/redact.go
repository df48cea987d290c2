package natsconn

import (
	"fmt"
	"strings"
)

// RedactURL hides the user information of every URL in a comma-separated list, e.g.
// "nats://user:pass@host" becomes "nats://<redacted>@host".
func RedactURL(s string) string {
	items := strings.Split(s, ",")
	for i, item := range items {
		at := strings.LastIndex(item, "@")
		if at < 0 {
			continue
		}
		prefix := ""
		if scheme, _, ok := strings.Cut(item, "://"); ok && !strings.Contains(scheme, "@") {
			prefix = scheme + "://"
		}
		items[i] = fmt.Sprintf("%s%s@%s", prefix, Redacted, item[at+1:])
	}
	return strings.Join(items, ",")
}

// RedactArgs joins a command line for a message, each argument's URL credentials redacted.
func RedactArgs(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = RedactURL(a)
	}
	return strings.Join(out, " ")
}

// RedactUserinfo replaces in text the user information of every URL in urls (each a
// comma-separated list, as RedactURL takes, or an argument such as --server=URL), so that a
// message quoting one of them, such as url.Parse's or nats.Connect's, prints no credentials.
func RedactUserinfo(text string, urls ...string) string {
	for _, list := range urls {
		for item := range strings.SplitSeq(list, ",") {
			if _, value, ok := strings.Cut(item, "="); ok && strings.HasPrefix(item, "-") {
				item = value // --flag=URL
			}
			at := strings.LastIndex(item, "@")
			if at < 0 {
				continue
			}
			start := 0
			if scheme, _, ok := strings.Cut(item, "://"); ok && !strings.Contains(scheme, "@") {
				start = len(scheme) + len("://")
			}
			if userinfo := item[start : at+1]; userinfo != "@" {
				text = strings.ReplaceAll(text, userinfo, Redacted+"@")
			}
		}
	}
	return text
}
