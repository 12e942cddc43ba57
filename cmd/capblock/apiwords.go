package main

import (
	"regexp"
	"strings"
)

// searchFlags are the flags of the searches, by the query field each sets.
var searchFlags = map[string]string{
	"instanceType": "--type", "instanceCount": "--count", "durationHours": "--duration",
	"minDurationHours": "--min-duration", "maxDurationHours": "--max-duration",
	"startAfter": "--start-after", "endBefore": "--end-before", "zone": "--zone",
	"maxResults": "--max-results", "maxSegments": "--max-segments", "target": "--target",
}

// purchaseFlags are the flags of a purchase, by the body field each sets.
var purchaseFlags = map[string]string{
	"name": "--name", "tags": "--tag", "clientToken": "--client-token", "team": "--team",
}

// commandFlags maps, for each command, the API's name of a request field to
// the flag that sets it, so that the server's words about a field ("query.
// instanceCount: expected number >= 1", "endBefore … must be after
// startAfter …") read as the command line that was typed.
var commandFlags = map[string]map[string]string{
	"capblock offerings":                  searchFlags,
	"capblock plans offerings":            searchFlags,
	"capblock buy":                        purchaseFlags,
	"capblock plans buy":                  purchaseFlags,
	"capblock blocks extension-offerings": {"durationHours": "--duration"},
	"capblock blocks extend":              {"durationHours": "--duration", "offeringId": "--offering"},
	"capblock blocks list":                {"state": "--state"},
	"capblock events":                     {"after": "--after"},
	"capblock audit":                      {"after": "--after"},
	"capblock jobs run": {"name": "--name", "planId": "--plan", "blockId": "--block", "env": "--env",
		"instanceCount": "--instances", "maxRestarts": "--max-restarts"},
	"capblock teams quota": {"maxInstancesPerBlock": "--max-per-block", "maxInstancesHeld": "--max-held",
		"maxDurationHours": "--max-duration", "maxLeadDays": "--max-lead", "instanceType": "--type"},
	"capblock teams budget":  {"amount": "--amount", "period": "--period", "currency": "--currency"},
	"capblock users create":  {"name": "NAME", "team": "--team", "role": "--role"},
	"capblock tokens create": {"expiresIn": "--expires-in"},
	"capblock spend":         {"team": "--team", "from": "--from", "to": "--to"},
}

// routeCommands are the commands that show what an API route answers, for
// a server's message that points at a route.
var routeCommands = map[string]string{
	"GET /v1/instance-types": "'capblock types'",
	"GET /v1/nodes":          "'capblock nodes'",
	"GET /v1/blocks":         "'capblock blocks list'",
	"GET /v1/plans":          "'capblock plans list'",
	"GET /v1/jobs":           "'capblock jobs list'",
	"GET /v1/teams":          "'capblock teams list'",
}

var (
	// fieldPath is a field as huma locates it: query.instanceCount.
	fieldPath = regexp.MustCompile(`\b(?:query|body|path)\.([A-Za-z]+)\b`)
	// camelWord is a word that can only be an API field: instanceCount.
	camelWord = regexp.MustCompile(`\b[a-z]+[A-Z][A-Za-z]*\b`)
	// routeWord is an API route in a message.
	routeWord = regexp.MustCompile(`\b(?:GET|POST|PUT|DELETE) /v1/[A-Za-z0-9/{}._-]*`)
)

// inFlagWords rewrites the server's words in msg, the message of a
// failure of command path, in the command's: a located field (query.x,
// body.x) becomes its flag, or the bare field name when the command has
// no flag for it; a camelCase field name that the command has a flag for
// becomes the flag; a route that a command lists becomes that command.
func inFlagWords(path, msg string) string {
	flags := commandFlags[path]
	msg = fieldPath.ReplaceAllStringFunc(msg, func(m string) string {
		field := m[strings.IndexByte(m, '.')+1:]
		if f, ok := flags[field]; ok {
			return f
		}
		return field
	})
	msg = camelWord.ReplaceAllStringFunc(msg, func(m string) string {
		if f, ok := flags[m]; ok {
			return f
		}
		return m
	})
	return routeWord.ReplaceAllStringFunc(msg, func(m string) string {
		if c, ok := routeCommands[m]; ok {
			return c
		}
		return m
	})
}
