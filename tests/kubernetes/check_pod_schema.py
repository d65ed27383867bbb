#!/usr/bin/python3
"""Checks a Pod manifest (JSON, on stdin or in the file named) against the Kubernetes API's own
Pod schema, as Debian's python3-kubernetes carries it in its generated models (API 1.22): every
key must be a field of its object, every value of the field's type, and every required field
present. Prints one line per problem and exits 1 when there is any; exits 0 for a valid Pod.

The models know their fields (attribute_map: Python name -> JSON name) and types (openapi_types:
"str", "int", "bool", "dict(str, str)", "list[V1Container]", "V1PodSpec", ...); a model's
constructor raises ValueError when a required field is None.
"""
import json
import re
import sys

import kubernetes.client as models

PRIMITIVES = {"str": str, "int": int, "bool": bool, "float": (int, float), "object": object}


def check(value, type_name, path, problems):
    if type_name in PRIMITIVES:
        wanted = PRIMITIVES[type_name]
        if type_name == "int" and isinstance(value, bool):
            problems.append(f"{path}: expected int, got bool")
        elif not isinstance(value, wanted):
            problems.append(f"{path}: expected {type_name}, got {type(value).__name__}")
        return
    match = re.fullmatch(r"list\[(.+)\]", type_name)
    if match:
        if not isinstance(value, list):
            problems.append(f"{path}: expected a list")
            return
        for index, item in enumerate(value):
            check(item, match.group(1), f"{path}[{index}]", problems)
        return
    match = re.fullmatch(r"dict\(str, (.+)\)", type_name)
    if match:
        if not isinstance(value, dict):
            problems.append(f"{path}: expected an object")
            return
        for key, item in value.items():
            check(item, match.group(1), f"{path}.{key}", problems)
        return
    model = getattr(models, type_name)
    if not isinstance(value, dict):
        problems.append(f"{path}: expected an object ({type_name})")
        return
    by_json_name = {json_name: python_name for python_name, json_name in model.attribute_map.items()}
    for key, item in value.items():
        if key not in by_json_name:
            problems.append(f"{path}.{key}: not a field of {type_name}")
            continue
        check(item, model.openapi_types[by_json_name[key]], f"{path}.{key}", problems)
    # Required fields: the constructor refuses None for them. Others are left out, as absent.
    present = {by_json_name[key]: True for key in value if key in by_json_name}
    try:
        model(**{name: present.get(name) for name in model.openapi_types})
    except ValueError as error:
        problems.append(f"{path}: {error}")
    except TypeError:
        pass  # a value of the right shape but not the model's own type: checked above


def main():
    text = open(sys.argv[1]).read() if len(sys.argv) > 1 else sys.stdin.read()
    pod = json.loads(text)
    problems = []
    check(pod, "V1Pod", "pod", problems)
    if pod.get("apiVersion") != "v1" or pod.get("kind") != "Pod":
        problems.append("pod: apiVersion must be v1 and kind Pod")
    for problem in problems:
        print(problem)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
