"""A Python producer for the mixed-producer integration test: submits jobs with conveyor_client
and prints one JSON line per job ({"id", "prompt", "events"}) once every stream has ended.

    py_producer.py ROUTER PUB ID_PREFIX MAX_TOKENS PROMPT [PROMPT ...]   (one job per prompt)
"""
import json
import sys

from conveyor_client import Client


def main():
    router, pub, prefix, max_tokens, prompts = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5:]
    with Client(router, pub) as c:
        ids = [c.submit(prompt=p, id=f"{prefix}/{i}", max_tokens=max_tokens, temperature=0) for i, p in enumerate(prompts)]
        for job_id, prompt in zip(ids, prompts):
            print(json.dumps({"id": job_id, "prompt": prompt, "events": list(c.stream(job_id, timeout=300))}), flush=True)


if __name__ == "__main__":
    main()
