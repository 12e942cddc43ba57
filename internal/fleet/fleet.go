// Package fleet reads the fleet file: the YAML document in which an
// operator declares the zones, racks and GPU nodes that capblock manages,
// the instance types sold on them, the currency, the limits and the pricing
// policy. Parse and Load turn it into a validated core.Fleet; Demo is the
// built-in fleet of `capblock serve` with no flags. The format is
// documented in docs/fleet.md; examples/fleet.yaml shows every key.
package fleet

import (
	_ "embed"
	"errors"
	"fmt"
	"os"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/parser"

	"capblock/internal/core"
)

// fileFleet is the fleet file's top level. Field tags are the YAML keys;
// decoding is strict, so any other key is an error.
type fileFleet struct {
	Currency      string             `yaml:"currency"`
	Limits        fileLimits         `yaml:"limits"`
	Pricing       filePricing        `yaml:"pricing"`
	InstanceTypes []fileInstanceType `yaml:"instanceTypes"`
	Zones         []fileZone         `yaml:"zones"`
	Slurm         fileSlurm          `yaml:"slurm"`
}

// fileLimits mirrors core.Limits. Durations are strings in humantime's
// syntax ("1h", "182d", "8w"); an absent key keeps core.DefaultLimits.
type fileLimits struct {
	MaxInstancesPerBlock     number `yaml:"maxInstancesPerBlock"`
	MinDuration              string `yaml:"minDuration"`
	MaxDuration              string `yaml:"maxDuration"`
	MinLeadTime              string `yaml:"minLeadTime"`
	MaxLeadTime              string `yaml:"maxLeadTime"`
	Horizon                  string `yaml:"horizon"`
	OfferingTTL              string `yaml:"offeringTTL"`
	LockIn                   string `yaml:"lockIn"`
	WarnBefore               string `yaml:"warnBefore"`
	TerminateBefore          string `yaml:"terminateBefore"`
	ExtendFrom               string `yaml:"extendFrom"`
	ExtendUntil              string `yaml:"extendUntil"`
	RefundBeforeStartPercent number `yaml:"refundBeforeStartPercent"`
	RefundAfterStartPercent  number `yaml:"refundAfterStartPercent"`
	MaxResults               number `yaml:"maxResults"`
	ApprovalAboveInstances   number `yaml:"approvalAboveInstances"`
	ApprovalDeadline         string `yaml:"approvalDeadline"`
	Transfers                string `yaml:"transfers"`
	ResaleFeePercent         number `yaml:"resaleFeePercent"`
	BackfillNotice           string `yaml:"backfillNotice"`
	LendCreditPercent        number `yaml:"lendCreditPercent"`
	BudgetCountsCredits      *bool  `yaml:"budgetCountsCredits"`
}

// filePricing mirrors core.Pricing as factors of the on-demand price
// ("0.75"), at most four decimals, converted to basis points.
type filePricing struct {
	Floor        decimal `yaml:"floor"`
	Cap          decimal `yaml:"cap"`
	Base         decimal `yaml:"base"`
	Utilization  decimal `yaml:"utilization"`
	LeadDiscount decimal `yaml:"leadDiscount"`
	SpotFactor   decimal `yaml:"spotFactor"`
}

type fileInstanceType struct {
	Name            string   `yaml:"name"`
	GPUModel        string   `yaml:"gpuModel"`
	GPUsPerInstance number   `yaml:"gpusPerInstance"`
	OnDemandPrice   decimal  `yaml:"onDemandPrice"`
	AWSNames        []string `yaml:"awsNames"`
}

type fileZone struct {
	Name  string     `yaml:"name"`
	Racks []fileRack `yaml:"racks"`
}

type fileRack struct {
	Name       string          `yaml:"name"`
	NodeGroups []fileNodeGroup `yaml:"nodeGroups"`
}

// fileNodeGroup declares either one node (name) or count nodes named
// prefix + zero-padded index, from first (default 1) on.
type fileNodeGroup struct {
	Name     string            `yaml:"name"`
	Prefix   string            `yaml:"prefix"`
	Count    number            `yaml:"count"`
	First    number            `yaml:"first"`
	Digits   number            `yaml:"digits"`
	GPUModel string            `yaml:"gpuModel"`
	GPUs     number            `yaml:"gpus"`
	Labels   map[string]string `yaml:"labels"`
}

// Load reads and validates the fleet file at path. Problems in the file
// come back as an ErrorList whose entries name the file and line.
func Load(path string) (core.Fleet, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return core.Fleet{}, fmt.Errorf("reading fleet file: %w", err)
	}
	f, err := Parse(data)
	var list ErrorList
	if errors.As(err, &list) {
		for _, e := range list {
			e.File = path
		}
		return core.Fleet{}, list
	}
	return f, err
}

// Parse decodes and validates a fleet file. Every problem found is
// reported, one line each, in an ErrorList.
func Parse(data []byte) (core.Fleet, error) {
	f, _, err := parse(data)
	return f, err
}

// parse decodes and validates a fleet file: the fleet, and the slurm
// section (slurm.go).
func parse(data []byte) (core.Fleet, Slurm, error) {
	// 1. Parse the YAML once: the AST locates validation errors by line.
	file, err := parser.ParseBytes(data, 0)
	if err != nil {
		return core.Fleet{}, Slurm{}, ErrorList{decodeError(err)}
	}
	if len(file.Docs) > 1 {
		return core.Fleet{}, Slurm{}, ErrorList{{Line: 1, Msg: fmt.Sprintf("the file holds %d YAML documents; a fleet file is one document", len(file.Docs))}}
	}
	// 2. Decode strictly: unknown keys, duplicate keys and wrong types stop here.
	var ff fileFleet
	if err := yaml.UnmarshalWithOptions(data, &ff, yaml.Strict()); err != nil {
		return core.Fleet{}, Slurm{}, ErrorList{decodeError(err)}
	}
	// 3. Validate and build the fleet.
	c := &checker{file: file}
	fleet := c.build(ff)
	if len(c.errs) > 0 {
		return core.Fleet{}, Slurm{}, c.errs
	}
	return fleet, c.slurmSection, nil
}

//go:embed demo.yaml
var demoYAML []byte

// Demo returns the built-in demo fleet: two zones of H100, A100 and L4
// nodes. It is parsed from the embedded demo.yaml, itself an example of
// the fleet file format.
func Demo() core.Fleet {
	f, err := Parse(demoYAML)
	if err != nil {
		panic(fmt.Sprintf("fleet: the embedded demo.yaml is invalid: %v", err))
	}
	return f
}
