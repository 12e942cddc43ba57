package fleet

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/goccy/go-yaml/ast"

	"capblock/internal/core"
)

// Bounds of the fleet file's values.
const (
	maxGPUsPerNode   = 64
	maxGroupCount    = 100000
	maxNameLength    = 63
	maxFactorBP      = 100000 // pricing factors up to 10 × on-demand
	maxInstancesCap  = 100000
	maxResultsCap    = 100
	maxOfferingTTL   = 24 * time.Hour
	maxIndexDigits   = 9
	defaultMinDigits = 2
)

// checker validates a decoded fleet file, collecting every problem with
// the line it comes from.
type checker struct {
	file *ast.File
	errs ErrorList
	// slurmSection is the file's slurm section, once build has run.
	slurmSection Slurm
}

// addf records a problem at a YAML path (for its line) in a named place.
func (c *checker) addf(path, where, format string, args ...any) {
	c.errs = append(c.errs, &Error{Line: lineOf(c.file, path), Where: where, Msg: fmt.Sprintf(format, args...)})
}

// build validates ff and converts it; the result is meaningful only when
// c.errs is empty.
func (c *checker) build(ff fileFleet) core.Fleet {
	f := core.Fleet{Currency: ff.Currency}
	switch {
	case ff.Currency == "":
		c.addf("$", "", "currency is missing; add e.g. `currency: USD`")
	default:
		if err := checkCurrency(ff.Currency); err != nil {
			c.addf("$.currency", "", "%v", err)
		}
	}
	f.Limits = c.limits(ff.Limits)
	f.Pricing = c.pricing(ff.Pricing)
	f.Types = c.instanceTypes(ff.InstanceTypes, ff.Currency)
	var groups []groupRef
	f.Nodes, groups = c.nodes(ff.Zones)
	c.crossCheck(f.Types, groups)
	c.slurmSection = c.slurm(ff.Slurm)
	// Report in file order, whichever check found the problem.
	sort.SliceStable(c.errs, func(i, j int) bool { return c.errs[i].Line < c.errs[j].Line })
	return f
}

// checkName accepts names that are safe in URLs, labels and file names.
func checkName(s string) error {
	if len(s) > maxNameLength {
		return fmt.Errorf("%q is longer than %d characters", s, maxNameLength)
	}
	for i := range len(s) {
		ch := s[i]
		ok := ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '-' || ch == '_' || ch == '.'
		if !ok {
			return fmt.Errorf("%q may hold only letters, digits, '-', '_' and '.'", s)
		}
	}
	return nil
}

// requireName reports a missing or malformed name of kind at path.
func (c *checker) requireName(path, where, key, value string) bool {
	if value == "" {
		c.addf(path, where, "%s is missing", key)
		return false
	}
	if err := checkName(value); err != nil {
		c.addf(path+"."+key, where, "%s %v", key, err)
		return false
	}
	return true
}

func (c *checker) instanceTypes(fts []fileInstanceType, currency string) []core.InstanceType {
	if len(fts) == 0 {
		c.addf("$", "", "no instance types; declare what is sold under instanceTypes")
	}
	seen := map[string]bool{}
	types := make([]core.InstanceType, 0, len(fts))
	for i, ft := range fts {
		path := fmt.Sprintf("$.instanceTypes[%d]", i)
		where := typeWhere(i, ft.Name)
		if c.requireName(path, where, "name", ft.Name) {
			if seen[ft.Name] {
				c.addf(path+".name", where, "duplicate instance type name")
			}
			seen[ft.Name] = true
		}
		c.requireName(path, where, "gpuModel", ft.GPUModel)
		switch {
		case !ft.GPUsPerInstance.set:
			c.addf(path, where, "gpusPerInstance is missing")
		case ft.GPUsPerInstance.v < 1 || ft.GPUsPerInstance.v > maxGPUsPerNode:
			c.addf(path+".gpusPerInstance", where, "gpusPerInstance is %d, must be 1 to %d", ft.GPUsPerInstance.v, maxGPUsPerNode)
		}
		var price int64
		switch {
		case !ft.OnDemandPrice.set:
			c.addf(path, where, "onDemandPrice is missing; give the price of one instance-hour, e.g. \"98.32\"")
		default:
			v, err := parseDecimal(ft.OnDemandPrice.text, 2)
			switch {
			case err != nil:
				c.addf(path+".onDemandPrice", where, "onDemandPrice %q %v", ft.OnDemandPrice.text, err)
			case v <= 0:
				c.addf(path+".onDemandPrice", where, "onDemandPrice %q must be more than 0", ft.OnDemandPrice.text)
			}
			price = v
		}
		types = append(types, core.InstanceType{
			Name:            ft.Name,
			GPUModel:        ft.GPUModel,
			GPUsPerInstance: ft.GPUsPerInstance.v,
			OnDemand:        core.Money{Minor: price, Currency: currency},
			AWSNames:        ft.AWSNames,
		})
	}
	c.awsNames(fts, seen)
	return types
}

// awsNames checks the AWS names of the types: each a valid name, none
// given twice across the fleet, none another type's own name, so that a
// name in an AWS request finds one type.
func (c *checker) awsNames(fts []fileInstanceType, typeNames map[string]bool) {
	owner := map[string]string{}
	for i, ft := range fts {
		path := fmt.Sprintf("$.instanceTypes[%d]", i)
		where := typeWhere(i, ft.Name)
		for j, n := range ft.AWSNames {
			key := fmt.Sprintf("awsNames[%d]", j)
			if !c.requireName(path, where, key, n) {
				continue
			}
			switch {
			case typeNames[n] && n != ft.Name:
				c.addf(path+"."+key, where, "AWS name %q is the name of another instance type", n)
			case owner[n] != "":
				c.addf(path+"."+key, where, "AWS name %q is already given to instance type %q", n, owner[n])
			default:
				owner[n] = ft.Name
			}
		}
	}
}

func typeWhere(i int, name string) string {
	if name == "" {
		return fmt.Sprintf("instance type #%d", i+1)
	}
	return fmt.Sprintf("instance type %q", name)
}

// groupRef remembers where a node group was declared, for cross-checks.
type groupRef struct {
	path, where string
	gpuModel    string
	gpus        int
}

func (c *checker) nodes(zones []fileZone) ([]core.Node, []groupRef) {
	if len(zones) == 0 {
		c.addf("$", "", "no zones; declare nodes under zones[].racks[].nodeGroups[]")
	}
	var (
		nodes     []core.Node
		groups    []groupRef
		zoneSeen  = map[string]bool{}
		rackSeen  = map[string]string{} // rack name → zone
		nodeOwner = map[string]string{} // node name → where declared
	)
	for zi, z := range zones {
		zpath := fmt.Sprintf("$.zones[%d]", zi)
		zwhere := placeWhere("zone", zi, z.Name)
		if c.requireName(zpath, zwhere, "name", z.Name) {
			if zoneSeen[z.Name] {
				c.addf(zpath+".name", zwhere, "duplicate zone name")
			}
			zoneSeen[z.Name] = true
		}
		if len(z.Racks) == 0 {
			c.addf(zpath, zwhere, "no racks; declare them under racks")
		}
		for ri, r := range z.Racks {
			rpath := fmt.Sprintf("%s.racks[%d]", zpath, ri)
			rwhere := zwhere + " " + placeWhere("rack", ri, r.Name)
			if c.requireName(rpath, rwhere, "name", r.Name) {
				if other, dup := rackSeen[r.Name]; dup {
					c.addf(rpath+".name", rwhere, "duplicate rack name (also in zone %q); rack names are unique across the fleet", other)
				}
				rackSeen[r.Name] = z.Name
			}
			if len(r.NodeGroups) == 0 {
				c.addf(rpath, rwhere, "no node groups; declare them under nodeGroups")
			}
			for gi, g := range r.NodeGroups {
				gpath := fmt.Sprintf("%s.nodeGroups[%d]", rpath, gi)
				gwhere := rwhere + " " + groupWhere(gi, g)
				names := c.nodeNames(gpath, gwhere, g)
				gpus := c.nodeGroupGPUs(gpath, gwhere, g)
				groups = append(groups, groupRef{path: gpath, where: gwhere, gpuModel: g.GPUModel, gpus: gpus})
				var dupName, dupOwner string
				dups := 0
				for _, name := range names {
					if owner, dup := nodeOwner[name]; dup {
						if dups == 0 {
							dupName, dupOwner = name, owner
						}
						dups++
						continue
					}
					nodeOwner[name] = gwhere
					nodes = append(nodes, core.Node{
						Name:     name,
						Zone:     z.Name,
						Rack:     r.Name,
						GPUModel: g.GPUModel,
						GPUs:     gpus,
						Labels:   copyLabels(g.Labels),
						Health:   core.Healthy,
					})
				}
				switch {
				case dups == 1:
					c.addf(gpath, gwhere, "node name %q is already declared by %s", dupName, dupOwner)
				case dups > 1:
					c.addf(gpath, gwhere, "node name %q and %d more are already declared by %s", dupName, dups-1, dupOwner)
				}
			}
		}
	}
	return nodes, groups
}

func placeWhere(kind string, i int, name string) string {
	if name == "" {
		return fmt.Sprintf("%s #%d", kind, i+1)
	}
	return fmt.Sprintf("%s %q", kind, name)
}

func groupWhere(i int, g fileNodeGroup) string {
	switch {
	case g.Name != "":
		return fmt.Sprintf("node %q", g.Name)
	case g.Prefix != "":
		return fmt.Sprintf("node group %q", g.Prefix)
	}
	return fmt.Sprintf("node group #%d", i+1)
}

// nodeNames expands a node group into its node names: one given name, or
// prefix + zero-padded index for count nodes from first on.
func (c *checker) nodeNames(path, where string, g fileNodeGroup) []string {
	if g.Name != "" {
		if g.Prefix != "" || g.Count.set || g.First.set || g.Digits.set {
			c.addf(path+".name", where, "give either name (one node) or prefix with count, not both")
			return nil
		}
		if !c.requireName(path, where, "name", g.Name) {
			return nil
		}
		return []string{g.Name}
	}
	if g.Prefix == "" {
		c.addf(path, where, "name or prefix is missing; give name for one node or prefix and count for several")
		return nil
	}
	if !c.requireName(path, where, "prefix", g.Prefix) {
		return nil
	}
	switch {
	case !g.Count.set:
		c.addf(path, where, "count is missing")
		return nil
	case g.Count.v < 1 || g.Count.v > maxGroupCount:
		c.addf(path+".count", where, "count is %d, must be 1 to %d", g.Count.v, maxGroupCount)
		return nil
	}
	first := 1
	if g.First.set {
		if g.First.v < 0 {
			c.addf(path+".first", where, "first is %d, must be 0 or more", g.First.v)
			return nil
		}
		first = g.First.v
	}
	last := first + g.Count.v - 1
	digits := max(defaultMinDigits, len(strconv.Itoa(last)))
	if g.Digits.set {
		if g.Digits.v < 1 || g.Digits.v > maxIndexDigits {
			c.addf(path+".digits", where, "digits is %d, must be 1 to %d", g.Digits.v, maxIndexDigits)
			return nil
		}
		if len(strconv.Itoa(last)) > g.Digits.v {
			c.addf(path+".digits", where, "digits is %d, too few for the last index %d", g.Digits.v, last)
			return nil
		}
		digits = g.Digits.v
	}
	if len(g.Prefix)+digits > maxNameLength {
		c.addf(path+".prefix", where, "prefix %q makes node names longer than %d characters", g.Prefix, maxNameLength)
		return nil
	}
	names := make([]string, 0, g.Count.v)
	for i := first; i <= last; i++ {
		names = append(names, fmt.Sprintf("%s%0*d", g.Prefix, digits, i))
	}
	return names
}

// nodeGroupGPUs checks the group's GPU model, GPU count and labels and
// returns the GPU count.
func (c *checker) nodeGroupGPUs(path, where string, g fileNodeGroup) int {
	c.requireName(path, where, "gpuModel", g.GPUModel)
	for k := range g.Labels {
		if k == "" {
			c.addf(path+".labels", where, "a label has an empty key")
		}
	}
	switch {
	case !g.GPUs.set:
		c.addf(path, where, "gpus is missing")
	case g.GPUs.v < 1 || g.GPUs.v > maxGPUsPerNode:
		c.addf(path+".gpus", where, "gpus is %d, must be 1 to %d", g.GPUs.v, maxGPUsPerNode)
	}
	return g.GPUs.v
}

func copyLabels(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// crossCheck ties instance types to nodes: every type is sold on some node
// of its GPU model and fits a whole number of times on each such node, and
// every node's model is sold by some type.
func (c *checker) crossCheck(types []core.InstanceType, groups []groupRef) {
	sold := map[string]bool{}
	for i, t := range types {
		sold[t.GPUModel] = true
		if t.GPUModel == "" || t.GPUsPerInstance < 1 || t.GPUsPerInstance > maxGPUsPerNode {
			continue // already reported
		}
		path := fmt.Sprintf("$.instanceTypes[%d]", i)
		where := typeWhere(i, t.Name)
		found := false
		for _, g := range groups {
			if g.gpuModel != t.GPUModel {
				continue
			}
			found = true
			if g.gpus >= 1 && g.gpus <= maxGPUsPerNode && g.gpus%t.GPUsPerInstance != 0 {
				c.addf(path+".gpusPerInstance", where, "gpusPerInstance %d does not divide the %d GPUs of %s", t.GPUsPerInstance, g.gpus, g.where)
			}
		}
		if !found {
			c.addf(path+".gpuModel", where, "no node has gpuModel %q; add nodes of that model or fix the model name", t.GPUModel)
		}
	}
	reported := map[string]bool{}
	for _, g := range groups {
		if g.gpuModel != "" && !sold[g.gpuModel] && !reported[g.gpuModel] {
			reported[g.gpuModel] = true
			c.addf(g.path+".gpuModel", g.where, "no instance type sells gpuModel %q; add one under instanceTypes or fix the model name", g.gpuModel)
		}
	}
}
