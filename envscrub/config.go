package envscrub

import "github.com/hashicorp/go-hclog"

// Config says how a Scrubber builds kernel environments.
type Config struct {
	// Passthrough names variables every kernel receives even when rules 2-5
	// would drop them (the config file's global list plus
	// `kernpool serve --passthrough`). Each is checked against the refusal
	// list by New.
	Passthrough []string
	// ModePassthrough adds names per mode (the profile's passthrough list).
	ModePassthrough map[string][]string
	// Refuse lists names and '*'/'?' glob patterns that may never be passed
	// through (compared case-insensitively). nil means DefaultRefuse; an
	// empty non-nil slice refuses nothing but the reserved KERNPOOL_ names.
	Refuse []string
	// Windows judges names with the Windows rules (essentials, mixed-case
	// Path, ';' in PYTHONPATH). New forces it on when runtime.GOOS is
	// windows; tests set it to exercise the rules on any host.
	Windows bool
	// Parent returns the daemon's environment; it is read at every Build,
	// so each kernel's environment is frozen at its own spawn. nil means
	// os.Environ.
	Parent func() []string
	// PoolInstallDirs are directories of kernpool's own install: PYTHONPATH
	// entries inside them are dropped so a kernel cannot import the pool's
	// private modules.
	PoolInstallDirs []string
	// Logger receives debug logs (dropped names, never values); nil
	// discards them.
	Logger hclog.Logger
}

// DefaultRefuse is the refusal list when Config.Refuse is nil: provider and
// platform credentials a passthrough once carried into a child
// (GHSA-rhgp-j443-p4rf in the reference), provider base URLs (a relay URL
// can embed a key), and the dynamic names of auxiliary and relay
// credentials.
var DefaultRefuse = []string{
	// LLM providers.
	"OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE", "OPENAI_ORG_ID",
	"OPENAI_ORGANIZATION", "AZURE_OPENAI_API_KEY", "AZURE_OPENAI_ENDPOINT",
	"OPENROUTER_API_KEY", "OPENROUTER_BASE_URL", "ANTHROPIC_API_KEY",
	"ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_TOKEN",
	"GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_APPLICATION_CREDENTIALS",
	"VERTEX_CREDENTIALS_PATH", "DEEPSEEK_API_KEY", "MISTRAL_API_KEY",
	"GROQ_API_KEY", "TOGETHER_API_KEY", "PERPLEXITY_API_KEY", "COHERE_API_KEY",
	"FIREWORKS_API_KEY", "XAI_API_KEY", "HELICONE_API_KEY", "HF_TOKEN",
	"HUGGING_FACE_HUB_TOKEN", "REPLICATE_API_TOKEN",
	// Source hosting and cloud.
	"GH_TOKEN", "GITHUB_TOKEN", "GITHUB_APP_ID", "GITHUB_APP_PRIVATE_KEY_PATH",
	"GITHUB_APP_INSTALLATION_ID", "GITLAB_TOKEN", "AWS_ACCESS_KEY_ID",
	"AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_BEARER_TOKEN_BEDROCK",
	"MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET", "DAYTONA_API_KEY", "VERCEL_TOKEN",
	"VERCEL_OIDC_TOKEN",
	// Messaging bots and gateways.
	"TELEGRAM_BOT_TOKEN", "DISCORD_BOT_TOKEN", "SLACK_BOT_TOKEN",
	"SLACK_APP_TOKEN", "SLACK_SIGNING_SECRET", "HASS_TOKEN", "EMAIL_PASSWORD",
	"SUDO_PASSWORD",
	// Dynamic names (the '*' may match nothing: AUXILIARY_API_KEY is refused).
	"AUXILIARY*_API_KEY", "AUXILIARY*_BASE_URL",
	"GATEWAY_RELAY*_SECRET", "GATEWAY_RELAY*_KEY", "GATEWAY_RELAY*_TOKEN",
	"GATEWAY_RELAY_ID",
}
