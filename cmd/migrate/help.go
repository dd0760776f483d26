package main

import (
	"flag"
	"strconv"
	"strings"
)

// helpDoc is the JSON document of help (migrate help -json, migrate -h
// -json, and migrate <command> -h -json for one command).
type helpDoc struct {
	docHeader               // command "help"; ok true
	Commands  []helpCommand `json:"commands"`
	ExitCodes []helpExit    `json:"exit_codes"`
}

// helpCommand is one command as its usage describes it.
type helpCommand struct {
	Name    string     `json:"name"`
	Args    string     `json:"args"`
	Summary string     `json:"summary"`
	Flags   []helpFlag `json:"flags"`
}

// helpFlag is one flag of a command.
type helpFlag struct {
	Name    string `json:"name"`
	Usage   string `json:"usage"`
	Default string `json:"default"`
}

// helpExit is one exit code and what it means, as exitCodes says it.
type helpExit struct {
	Code    int    `json:"code"`
	Meaning string `json:"meaning"`
}

// newHelpDoc returns the help document of cmds.
func newHelpDoc(cmds []*command) *helpDoc {
	doc := &helpDoc{docHeader: docHeader{Command: "help", OK: true}, Commands: []helpCommand{}, ExitCodes: exitCodeList()}
	for _, c := range cmds {
		hc := helpCommand{Name: c.name, Args: c.args, Summary: c.summary, Flags: []helpFlag{}}
		fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
		if c.flags != nil {
			c.flags(fs, &cmdEnv{})
		}
		fs.VisitAll(func(f *flag.Flag) {
			_, usage := flag.UnquoteUsage(f)
			hc.Flags = append(hc.Flags, helpFlag{Name: f.Name, Usage: usage, Default: f.DefValue})
		})
		doc.Commands = append(doc.Commands, hc)
	}
	return doc
}

// exitCodeList reads exitCodes, the text -h prints, as a list: one entry
// per line that starts with a code, continuation lines joined to it.
func exitCodeList() []helpExit {
	var out []helpExit
	for _, line := range strings.Split(exitCodes, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if code, err := strconv.Atoi(f[0]); err == nil && strings.HasPrefix(line, "  "+f[0]+"  ") {
			out = append(out, helpExit{Code: code, Meaning: strings.Join(f[1:], " ")})
			continue
		}
		if len(out) > 0 {
			out[len(out)-1].Meaning += " " + strings.Join(f, " ")
		}
	}
	return out
}
