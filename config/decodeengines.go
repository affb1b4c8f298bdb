package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/swarmhq/swarm/message"
)

func (b *builder) engines(raws map[string]rawEngine) {
	for name, re := range raws {
		at := "engine." + name
		e := Engine{Name: name, Kind: re.Kind, Model: re.Model, BaseURL: re.BaseURL, Command: re.Command, Preset: re.Preset, Args: re.Args, Prompt: re.Prompt}
		if !message.ValidName(name) {
			b.errorf(at, "bad engine name %q: use lower-case letters, digits and '-'", name)
		}
		switch e.Kind {
		case EngineGemini, EngineScript:
			if len(e.Command) > 0 || e.Preset != "" || e.Prompt != "" || len(e.Args) > 0 {
				b.errorf(at, "command, preset, args and prompt only apply to kind = \"exec\"")
			}
			if re.EnvFile != nil {
				b.errorf(at+".env_file", "env_file only applies to kind = \"exec\"; a %s engine runs in swarm's own process", e.Kind)
			}
		case EngineExec:
			b.execEngine(&e, at)
			if re.EnvFile != nil {
				e.EnvFile = b.envFile(at+".env_file", *re.EnvFile)
			}
		case "":
			b.errorf(at, "engine %s has no kind: set kind = \"gemini\", \"script\" or \"exec\"", name)
		default:
			b.errorf(at+".kind", "unknown engine kind %q (valid: gemini, script, exec)", e.Kind)
		}
		if re.APIKeyFile != nil {
			if e.Kind == EngineGemini {
				e.APIKeyFile = b.secretFile(at+".api_key_file", "api_key_file", *re.APIKeyFile)
			} else if e.Kind == EngineScript || e.Kind == EngineExec {
				b.errorf(at+".api_key_file", "api_key_file only applies to kind = \"gemini\"; for an exec engine, put the key in an env_file")
			}
		}
		b.cfg.Engines[name] = e
	}
}

// secretFile checks a file holding credentials, named by key in the file:
// it must be a regular file that only its owner may read. It returns the
// path made absolute; the file is read when the engine starts.
func (b *builder) secretFile(key, what, path string) string {
	abs, err := b.path(path)
	if err != nil {
		b.errorf(key, "%s %s: %v", what, path, err)
		return ""
	}
	if err := checkSecretFile(abs); err != nil {
		b.errorf(key, "%s %s: %v", what, path, err)
		return ""
	}
	return abs
}

// envFile checks an exec engine's env_file: a secret file in the format
// ReadEnvFile reads.
func (b *builder) envFile(key, path string) string {
	abs := b.secretFile(key, "env_file", path)
	if abs == "" {
		return ""
	}
	if _, err := ReadEnvFile(abs); err != nil {
		msg := err.Error()
		var fe *Error
		if errors.As(err, &fe) {
			msg = fe.Msg
			if fe.Line > 0 {
				msg = fmt.Sprintf("line %d: %s", fe.Line, fe.Msg)
			}
		}
		b.errorf(key, "env_file %s: %s", path, msg)
		return ""
	}
	return abs
}

func (b *builder) execEngine(e *Engine, at string) {
	switch {
	case len(e.Command) > 0 && e.Preset != "":
		b.errorf(at, "set either command or preset, not both")
	case len(e.Command) == 0 && e.Preset == "":
		b.errorf(at, "an exec engine needs command = [...] or preset = one of %s", strings.Join(Presets, ", "))
	case e.Preset != "" && !slices.Contains(Presets, e.Preset):
		b.errorf(at+".preset", "unknown preset %q (valid: %s)", e.Preset, strings.Join(Presets, ", "))
	case len(e.Command) > 0 && e.Command[0] == "":
		b.errorf(at+".command", "command[0] must name a program")
	}
	if e.Prompt == "" {
		e.Prompt = PromptStdin
	}
	if !slices.Contains([]string{PromptStdin, PromptArg, PromptFile}, e.Prompt) {
		b.errorf(at+".prompt", "prompt must be %q, %q or %q, got %q", PromptStdin, PromptArg, PromptFile, e.Prompt)
		return
	}
	if len(e.Command) > 0 {
		all := strings.Join(e.Command, "\x00")
		if e.Model != "" && !strings.Contains(all, ModelPlaceholder) {
			b.errorf(at+".model", "model = %q cannot reach the command: add a %q argument to command (e.g. \"--model\", %q), or remove model", e.Model, ModelPlaceholder, ModelPlaceholder)
		}
		switch {
		case e.Prompt == PromptArg && !strings.Contains(all, "{prompt}"):
			b.errorf(at+".command", "prompt = \"arg\" needs a \"{prompt}\" argument in command")
		case e.Prompt == PromptFile && !strings.Contains(all, "{prompt_file}"):
			b.errorf(at+".command", "prompt = \"file\" needs a \"{prompt_file}\" argument in command")
		}
	}
}

// execModel checks that an agent's model can reach its exec engine's custom
// command, and that a command asking for {model} gets one.
func (b *builder) execModel(a Agent, e Engine, at string) {
	if e.Kind != EngineExec || len(e.Command) == 0 || e.Model != "" {
		return
	}
	takes := strings.Contains(strings.Join(e.Command, "\x00"), ModelPlaceholder)
	switch {
	case a.ModelSet && !takes:
		b.errorf(at+".model", "agent %s sets model = %q, but engine %s's command has no %q argument to pass it in; add one to [engine.%s] command (e.g. \"--model\", %q), or remove model", a.Name, a.Model, e.Name, ModelPlaceholder, e.Name, ModelPlaceholder)
	case !a.ModelSet && takes:
		b.errorf(at, "agent %s runs engine %s, whose command takes %q, but no model is set; set model on the agent or in [engine.%s]", a.Name, e.Name, ModelPlaceholder, e.Name)
	}
}
