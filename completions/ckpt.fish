# fish completion for ckpt. Commands and options are read from `ckpt --help` and
# `ckpt COMMAND --help`, so the completion always matches the installed binary.

function __ckpt_commands
    ckpt --help 2>/dev/null | awk '/^commands:/{on=1; next} on && /^  [a-z]/{print $1}'
end

function __ckpt_options
    set -l cmd (commandline -opc)[2]
    ckpt $cmd --help 2>/dev/null | string match -ar -- '--[a-z][a-z0-9-]*' | sort -u
end

complete -c ckpt -f -n '__fish_use_subcommand' -a '(__ckpt_commands)'
complete -c ckpt -n 'not __fish_use_subcommand' -a '(__ckpt_options)'
complete -c ckpt -f -n '__fish_seen_subcommand_from explain' -a '(ckpt explain --list 2>/dev/null | string split -f1 " ")'
complete -c ckpt -l version -d 'print the version'
# Option values, as the bash and zsh completions offer them.
complete -c ckpt -n 'not __fish_use_subcommand' -l format -x -a 'text json jsonl github sarif'
complete -c ckpt -n 'not __fish_use_subcommand' -l engine -x -a 'transformers vllm sglang tgi mlx-lm swiftlm llama.cpp transformers.js'
